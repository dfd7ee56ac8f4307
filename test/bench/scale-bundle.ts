/**
 * The scale bench's children run as the finish-run Lambda runs its code: an esbuild bundle made
 * with the functions' own bundling options (`EXPORTER_BUNDLING`, what NodejsFunction passes to
 * esbuild at `cdk synth`), started by `node` with the functions' NODE_OPTIONS. The other way
 * (`SCALE_LOADER=tsx`) loads the TypeScript sources through tsx, as the figures before
 * 2026-11-26 did. Also the empty baselines: what a process holds once its modules are loaded.
 */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import * as nodejs from 'aws-cdk-lib/aws-lambda-nodejs';
import { type BuildOptions, build } from 'esbuild';
import {
  EXPORTER_BUNDLING,
  EXPORTER_MALLOC_MMAP_THRESHOLD,
  exporterNodeOptions,
} from '../../infra/constructs/exporter-function.js';

export type Loader = 'bundle' | 'tsx';

/**
 * The esbuild options NodejsFunction derives from `EXPORTER_BUNDLING` (aws-lambda-nodejs
 * bundling.ts: `--bundle --platform=node --target --format --minify --sourcemap
 * --sources-content --main-fields --external`). Typed by the keys of `EXPORTER_BUNDLING`: an
 * option added there fails typecheck here until it is translated (or said to have no effect on
 * the code, as Docker bundling has not).
 */
const TRANSLATE: {
  [K in keyof typeof EXPORTER_BUNDLING]: (v: (typeof EXPORTER_BUNDLING)[K]) => BuildOptions;
} = {
  format: (v: nodejs.OutputFormat) => ({ format: v === nodejs.OutputFormat.ESM ? 'esm' : 'cjs' }),
  target: (v) => ({ target: v }),
  mainFields: (v) => ({ mainFields: v }),
  minify: (v) => ({ minify: v }),
  // CDK's plain `--sourcemap`: a linked .map file beside the bundle.
  sourceMap: (v) => ({ sourcemap: v }),
  sourcesContent: (v) => ({ sourcesContent: v }),
  // Where esbuild runs (a container or this machine), not what it builds.
  forceDockerBundling: () => ({}),
  // CDK leaves the SDK v3 packages external unless the function bundles them.
  bundleAwsSDK: (v) => ({ external: v ? [] : ['@aws-sdk/*'] }),
  // What esbuild prints, not what it builds (the bench prints errors alone).
  logLevel: () => ({}),
};

/** The esbuild options a function's bundle is built with (`cdk synth`). */
export function lambdaBuildOptions(): BuildOptions {
  const options: BuildOptions = { bundle: true, platform: 'node', logLevel: 'error' };
  for (const key of Object.keys(EXPORTER_BUNDLING) as (keyof typeof EXPORTER_BUNDLING)[]) {
    const translate = TRANSLATE[key] as (v: unknown) => BuildOptions;
    Object.assign(options, translate(EXPORTER_BUNDLING[key]));
  }
  return options;
}

/** Bundles `entry` (and everything it imports) as a function's code is bundled, into `outfile`. */
export async function bundleAsLambda(entry: string, outfile: string): Promise<void> {
  await build({ ...lambdaBuildOptions(), entryPoints: [entry], outfile });
}

/**
 * The NODE_OPTIONS a function of `memoryMb` and `oldSpaceShare` gets from the stack (source maps and its V8 heap:
 * `exporterNodeOptions`), unless `SCALE_NODE_OPTIONS` names others to compare (for instance
 * `--enable-source-maps` alone: the heap Lambda's bootstrap sizes when NODE_OPTIONS sets none,
 * which the bench cannot start as the bootstrap does, or `--enable-source-maps
 * --max-old-space-size=870`, the bench's figures before the functions set their heap).
 */
export const functionNodeOptions = (
  memoryMb: number,
  oldSpaceShare: number,
  env: NodeJS.ProcessEnv = process.env,
): string => env.SCALE_NODE_OPTIONS ?? exporterNodeOptions(memoryMb, oldSpaceShare);

/**
 * The environment the functions' runtime process starts with, over `env`: `nodeOptions` as its
 * NODE_OPTIONS (no inherited one: a tsx parent's loader must not leak in) and their glibc mmap
 * threshold, unless `SCALE_MALLOC=default` asks for the C library's own (to compare).
 */
export function lambdaEnvironment(env: NodeJS.ProcessEnv, nodeOptions: string): NodeJS.ProcessEnv {
  const malloc =
    env.SCALE_MALLOC === 'default' ? {} : { MALLOC_MMAP_THRESHOLD_: EXPORTER_MALLOC_MMAP_THRESHOLD };
  return { ...env, NODE_OPTIONS: nodeOptions, ...malloc };
}

/**
 * How a child runs `script` (a bundle, or scale-child.ts under tsx) with the flags of
 * `nodeOptions`: the command's arguments and its environment. A bundle gets the functions'
 * environment ({@link lambdaEnvironment}); tsx, this process's, with the flags on its command line.
 */
export function childCommand(
  loader: Loader,
  script: string,
  nodeOptions: string,
  args: readonly string[],
): { argv: string[]; env: NodeJS.ProcessEnv } {
  if (loader === 'tsx') {
    const flags = nodeOptions.split(' ').filter(Boolean);
    return { argv: [...flags, '--import', 'tsx', script, ...args], env: process.env };
  }
  return { argv: [script, ...args], env: lambdaEnvironment(process.env, nodeOptions) };
}

const run = promisify(execFile);

/**
 * Peak RSS (VmHWM, MB) of a fresh node process, with `nodeOptions` as its NODE_OPTIONS, that
 * loads `bundle` (`require`, as the runtime loads a CommonJS handler), or nothing, and exits.
 * The median of `samples` processes.
 */
export async function loadedHighWaterMb(
  bundle: string | undefined,
  env: NodeJS.ProcessEnv,
  nodeOptions: string,
  samples = 3,
): Promise<number> {
  const load = bundle ? `require(${JSON.stringify(bundle)});` : '';
  // Whatever the import starts and does not await must not end the process before it reports.
  const script = `process.on('unhandledRejection', () => {}); ${load}
setImmediate(() => process.stdout.write(/^VmHWM:\\s+(\\d+) kB/m.exec(require('node:fs').readFileSync('/proc/self/status', 'utf8'))[1]));`;
  const figures: number[] = [];
  for (let i = 0; i < samples; i++) {
    const { stdout } = await run(process.execPath, ['-e', script], {
      env: lambdaEnvironment(env, nodeOptions),
    });
    figures.push(Number(stdout) / 1024);
  }
  return median(figures);
}

export const median = (xs: number[]): number =>
  [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? Number.NaN;
