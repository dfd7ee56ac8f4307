/**
 * `npm run build:package`: everything the npm package ships under dist/, built before `npm pack`
 * (prepack): the CLI (test/tools/build-cli.ts), the construct `campaign-report-exporter/construct`
 * (dist/construct.mjs and its types dist/construct.d.ts) and the four Lambda handlers prebuilt
 * (dist/lambda/<name>/index.js), which the packaged construct deploys as they are: a CDK app
 * that installs the package needs aws-cdk-lib and constructs, and no esbuild, Docker or sources.
 */
import { mkdirSync, readdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';
import ts from 'typescript';
import { entryOf, FUNCTION_NAMES } from '../../infra/constructs/functions.js';
import { bundleAsLambda } from '../bench/scale-bundle.js';
import { buildCli } from './build-cli.js';

const ROOT = new URL('../../', import.meta.url);
const DIST = fileURLToPath(new URL('dist/', ROOT));
const CONSTRUCT_SOURCE = fileURLToPath(new URL('infra/exporter.ts', ROOT));
const CONFIG_SOURCE = fileURLToPath(new URL('infra/config.ts', ROOT));
/** package.json `exports["./construct"]`. */
export const CONSTRUCT_BUNDLE = join(DIST, 'construct.mjs');
export const CONSTRUCT_TYPES = join(DIST, 'construct.d.ts');
/** The prebuilt handlers, relative to the construct's bundle (infra/constructs/functions.ts). */
const LAMBDA_DIR = './lambda/';

/**
 * The consumer's own copies (package.json `peerDependencies`, and their subpaths), never
 * bundled: the construct's classes must be those of the app's aws-cdk-lib (an `App` of one copy
 * does not hold a `Stack` of another).
 */
const PEERS = Object.keys(
  (
    JSON.parse(readFileSync(new URL('package.json', ROOT), 'utf8')) as {
      peerDependencies: Record<string, string>;
    }
  ).peerDependencies,
).flatMap((name) => [name, `${name}/*`]);

/** Writes `text` beside `file` and renames it over: a reader never sees half a file. */
function writeWhole(file: string, text: string): void {
  const partial = `${file}.${process.pid}.partial`;
  writeFileSync(partial, text);
  renameSync(partial, file);
}

/** Each handler bundled as `cdk synth` bundles it in the repository (EXPORTER_BUNDLING). */
async function buildLambdas(): Promise<void> {
  await Promise.all(
    FUNCTION_NAMES.map(async (name) => {
      const dir = join(DIST, 'lambda', name);
      // Built in a folder of its own, then renamed into place: two builds at once each finish whole.
      const partial = `${dir}.${process.pid}.partial`;
      rmSync(partial, { recursive: true, force: true });
      await bundleAsLambda(entryOf(name), join(partial, 'index.js'));
      rmSync(dir, { recursive: true, force: true });
      mkdirSync(dirname(dir), { recursive: true });
      renameSync(partial, dir);
    }),
  );
}

/** Whether the process `pid` still runs (a build's partial folder of a live process is its own). */
function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/**
 * Removes from dist/lambda/ what is not a function's bundle: a function renamed or dropped, or
 * the partial folder of a build that died. package.json `files` ships dist/lambda/ whole.
 */
function pruneLambdas(): void {
  const dir = join(DIST, 'lambda');
  for (const entry of readdirSync(dir)) {
    if ((FUNCTION_NAMES as readonly string[]).includes(entry)) continue;
    const pid = /\.(\d+)\.partial$/.exec(entry)?.[1];
    if (pid !== undefined && alive(Number(pid))) continue;
    rmSync(join(dir, entry), { recursive: true, force: true });
  }
}

/** The construct as one ES module: infra/exporter.ts with zod and the shared modules inside it. */
async function buildConstruct(target: string): Promise<void> {
  const partial = `${CONSTRUCT_BUNDLE}.${process.pid}.partial`;
  await build({
    entryPoints: [CONSTRUCT_SOURCE],
    outfile: partial,
    bundle: true,
    platform: 'node',
    format: 'esm',
    target,
    external: PEERS,
    define: { PREBUILT_LAMBDA_DIR: JSON.stringify(LAMBDA_DIR) },
    // Runs at synth, where a readable stack beats a small file.
    minify: false,
    logLevel: 'warning',
  });
  renameSync(partial, CONSTRUCT_BUNDLE);
}

/**
 * The construct's types, written from the compiler's view of infra/config.ts. Not `tsc
 * --declaration`: its declarations name zod's types and every module under infra/ and shared/,
 * which a consumer does not have. Here `ExporterConfig` is spelled out key by key (its TSDoc
 * kept), the props derive from it as in infra/exporter.ts, and the class's parts are typed by
 * the aws-cdk-lib classes they expose.
 */
export function constructTypes(): string {
  const program = ts.createProgram([CONFIG_SOURCE], {
    strict: true,
    module: ts.ModuleKind.NodeNext,
    moduleResolution: ts.ModuleResolutionKind.NodeNext,
    target: ts.ScriptTarget.ES2023,
    skipLibCheck: true,
    noEmit: true,
  });
  const checker = program.getTypeChecker();
  const module = checker.getSymbolAtLocation(program.getSourceFile(CONFIG_SOURCE)!)!;
  const config = checker.getExportsOfModule(module).find((s) => s.name === 'ExporterConfig');
  if (config === undefined) throw new Error('infra/config.ts no longer exports ExporterConfig');
  const flags = ts.TypeFormatFlags.NoTruncation | ts.TypeFormatFlags.UseSingleQuotesForStringLiteralType;
  const members = checker.getPropertiesOfType(checker.getDeclaredTypeOfSymbol(config)).map((p) => {
    const optional = (p.flags & ts.SymbolFlags.Optional) !== 0;
    const type = checker.getTypeOfSymbol(p);
    const text = ts.displayPartsToString(p.getDocumentationComment(checker)).trim();
    const doc = text === '' ? '' : `  /** ${text.replace(/\n/g, '\n   * ')} */\n`;
    const shown = checker.typeToString(optional ? checker.getNonNullableType(type) : type, undefined, flags);
    return `${doc}  readonly ${p.name}${optional ? '?' : ''}: ${shown};`;
  });
  if (!members.some((m) => m.endsWith('  readonly apiBaseUrl: string;')))
    throw new Error('ExporterConfig: apiBaseUrl is no longer a string');
  return `// Written by test/tools/build-package.ts from infra/config.ts and infra/exporter.ts: do not edit.
import type * as cloudwatch from 'aws-cdk-lib/aws-cloudwatch';
import type * as iam from 'aws-cdk-lib/aws-iam';
import type * as lambda from 'aws-cdk-lib/aws-lambda';
import type * as logs from 'aws-cdk-lib/aws-logs';
import type * as s3 from 'aws-cdk-lib/aws-s3';
import type * as sns from 'aws-cdk-lib/aws-sns';
import type * as sqs from 'aws-cdk-lib/aws-sqs';
import { Construct } from 'constructs';

/** The deployment configuration (docs/deploy.md), defaults applied. */
export interface ExporterConfig {
${members.join('\n')}
}

/**
 * The construct's props: the deployment configuration, every key optional but \`apiBaseUrl\`;
 * defaults and checks are those of the app's context.
 */
export type CampaignReportExporterProps = { readonly apiBaseUrl: string } & Readonly<
  Partial<Omit<ExporterConfig, 'apiBaseUrl'>>
>;

/** One stack output: its plain name (the docs'), value and description. */
export interface ExporterOutput {
  readonly name: string;
  readonly value: string;
  readonly description?: string;
}

export type FunctionName = 'start-run' | 'plan-campaign' | 'export-reports' | 'finish-run';

/** campaign-report-exporter: scheduled runs fanned out over SQS, landed in S3, queryable in Athena. */
export declare class CampaignReportExporter extends Construct {
  /** The validated configuration, defaults applied. */
  readonly config: ExporterConfig;
  readonly dataLake: Construct & {
    readonly bucket: s3.Bucket;
    readonly accessLogBucket: s3.Bucket;
    readonly dataPrefix: string;
  };
  readonly queues: Construct & {
    readonly plan: { readonly queue: sqs.Queue; readonly deadLetterQueue: sqs.Queue };
    readonly report: { readonly queue: sqs.Queue; readonly deadLetterQueue: sqs.Queue };
  };
  readonly functions: Construct & {
    readonly byName: Readonly<Record<FunctionName, lambda.Function>>;
    readonly logGroups: Readonly<Record<FunctionName, logs.LogGroup>>;
    readonly all: readonly lambda.Function[];
  };
  readonly monitoring: Construct & { readonly topic: sns.Topic; readonly dashboard: cloudwatch.Dashboard };
  /** Attach to the people who query the data (Athena workgroup, Glue reads, S3 reads). */
  readonly analystPolicy: iam.ManagedPolicy;
  /** @throws InfraConfigError naming every bad prop. */
  constructor(scope: Construct, id: string, props: CampaignReportExporterProps);
  /**
   * What a person needs after deploying, under the names the docs use: make each a stack output
   * (the construct makes none).
   */
  get outputs(): readonly ExporterOutput[];
}
`;
}

/** Builds dist/ whole: the CLI, the Lambda bundles, the construct and its types; resolves to their size. */
export async function buildPackage(): Promise<number> {
  mkdirSync(DIST, { recursive: true });
  const pkg = JSON.parse(readFileSync(new URL('package.json', ROOT), 'utf8')) as {
    engines: { node: string };
  };
  const target = `node${pkg.engines.node.replace(/^>=\s*/, '')}`;
  const [cli] = await Promise.all([buildCli(), buildLambdas(), buildConstruct(target)]);
  writeWhole(CONSTRUCT_TYPES, constructTypes());
  pruneLambdas();
  const lambdaBytes = FUNCTION_NAMES.reduce(
    (sum, name) => sum + statSync(join(DIST, 'lambda', name, 'index.js')).size,
    0,
  );
  return cli.bytes + lambdaBytes + statSync(CONSTRUCT_BUNDLE).size;
}

if (import.meta.main) {
  const bytes = await buildPackage();
  // On stderr: `npm pack --json` (prepack runs this) keeps its stdout for the JSON.
  process.stderr.write(`${DIST}  ${(bytes / 1024 / 1024).toFixed(1)} MB\n`);
}
