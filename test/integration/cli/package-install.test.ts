/**
 * The npm package installed as a user installs it: `npm pack` of this checkout, then (1) a fresh
 * CDK app outside the repository that depends on aws-cdk-lib, constructs and the tarball
 * synthesizes a stack with `CampaignReportExporter` from `campaign-report-exporter/construct`,
 * with neither esbuild nor Docker reachable, and type-checks against the package's types; (2) a
 * fresh global prefix installs the tarball and its `bin` exports from the simulator; (3) `npm
 * publish --dry-run` lists exactly the intended files. npm reads the registry mirror or its cache
 * only (`--prefer-offline`).
 */
import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { once } from 'node:events';
import { copyFile, mkdir, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { createInterface } from 'node:readline';
import { promisify } from 'node:util';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { FUNCTION_NAMES } from '../../../infra/constructs/functions.js';
import { tempDir } from '../../helpers/export.js';
import {
  expectedPackageFiles,
  PACK_TIMEOUT_MS,
  ROOT,
  releaseSharedPack,
  sharedPack,
} from '../../helpers/package.js';

const run = promisify(execFile);
/** An install from the cache of aws-cdk-lib (40 MB unpacked) takes 15 s here, more when busy. */
const INSTALL_TIMEOUT_MS = 240_000;
/**
 * Only the Node running the tests on PATH: no node_modules/.bin (esbuild, tsc), no
 * /usr/local/bin (Docker). A synth that tried to bundle would find neither and fail.
 */
const BARE_PATH = dirname(process.execPath);
const NPM_FLAGS = ['--prefer-offline', '--no-audit', '--no-fund'];

/** The version of a package this checkout has installed: the consumer gets the same. */
async function installedVersion(name: string): Promise<string> {
  const manifest = JSON.parse(await readFile(join(ROOT, 'node_modules', name, 'package.json'), 'utf8')) as {
    version: string;
  };
  return manifest.version;
}

/** npm as the user runs it, with the tests' Node first on PATH (npm's own scripts need a node). */
function npm(args: string[], cwd: string): Promise<{ stdout: string; stderr: string }> {
  return run('npm', args, {
    cwd,
    env: { ...process.env, PATH: `${BARE_PATH}:${process.env.PATH ?? ''}` },
    maxBuffer: 16 << 20,
  });
}

let work: string;
let tarball: string;
let version: string;

beforeAll(async () => {
  work = await tempDir('package-install');
  tarball = (await sharedPack()).tarball;
  version = JSON.parse(await readFile(join(ROOT, 'package.json'), 'utf8')).version;
}, PACK_TIMEOUT_MS);

afterAll(async () => {
  if (work) await rm(work, { recursive: true, force: true });
  await releaseSharedPack();
});

describe('npm publish --dry-run', () => {
  it('would publish exactly the intended files', async () => {
    const { stdout } = await npm(['publish', '--dry-run', '--json', tarball], work);
    const result = (JSON.parse(stdout) as Record<string, { version: string; files: { path: string }[] }>)[
      'campaign-report-exporter'
    ]!;
    expect(result.version).toBe(version);
    expect(result.files.map((f) => f.path).sort()).toEqual(expectedPackageFiles());
  });
});

describe('the construct in a fresh CDK app', () => {
  let app: string;

  beforeAll(async () => {
    app = join(work, 'cdk-app');
    await mkdir(app);
    const dependencies = {
      'aws-cdk-lib': await installedVersion('aws-cdk-lib'),
      constructs: await installedVersion('constructs'),
      'campaign-report-exporter': `file:${tarball}`,
    };
    await writeFile(
      join(app, 'package.json'),
      JSON.stringify({ name: 'consumer', private: true, type: 'module', dependencies }),
    );
    await npm(['install', ...NPM_FLAGS], app);
  }, INSTALL_TIMEOUT_MS);

  it('synthesizes the four functions from the prebuilt code the package ships: no bundling at synth', async () => {
    await writeFile(
      join(app, 'app.mjs'),
      `import { App, Stack } from 'aws-cdk-lib';
import { CampaignReportExporter } from 'campaign-report-exporter/construct';

const app = new App({ outdir: 'cdk.out' });
const stack = new Stack(app, 'Consumer');
const reports = new CampaignReportExporter(stack, 'Reports', { apiBaseUrl: 'https://api.acme.test' });
app.synth();
process.stdout.write(JSON.stringify(reports.outputs.map((o) => o.name)));
`,
    );
    const { stdout } = await run(process.execPath, ['app.mjs'], {
      cwd: app,
      env: { PATH: BARE_PATH, HOME: work },
      maxBuffer: 16 << 20,
    });
    expect(JSON.parse(stdout)).toContain('StartRunFunctionName');

    const out = join(app, 'cdk.out');
    const template = JSON.parse(await readFile(join(out, 'Consumer.template.json'), 'utf8')) as {
      Resources: Record<string, { Type: string; Properties: Record<string, unknown> }>;
    };
    const functions = Object.values(template.Resources).filter((r) => r.Type === 'AWS::Lambda::Function');
    const exporters = functions.filter((f) =>
      /^Starts|^Lists|^Fetches|^Closes/.test(String(f.Properties.Description)),
    );
    expect(exporters).toHaveLength(FUNCTION_NAMES.length);
    const shipped = join(app, 'node_modules', 'campaign-report-exporter', 'dist', 'lambda');
    const codes = new Set<string>();
    for (const fn of exporters) {
      expect(fn.Properties.Handler).toBe('index.handler');
      const key = (fn.Properties.Code as { S3Key: string }).S3Key;
      const asset = join(out, `asset.${key.replace(/\.zip$/, '')}`);
      codes.add(await readFile(join(asset, 'index.js'), 'utf8'));
    }
    // Each asset is one of the package's bundles as shipped, and each bundle is deployed.
    const bundles = await Promise.all(
      FUNCTION_NAMES.map((n) => readFile(join(shipped, n, 'index.js'), 'utf8')),
    );
    expect(codes).toEqual(new Set(bundles));
    // No bundling ran: CDK bundles in cdk.out/bundling-temp-*.
    expect((await readdir(out)).filter((f) => f.startsWith('bundling-temp-'))).toEqual([]);
  });

  it("type-checks a TypeScript app against the package's types", async () => {
    await writeFile(
      join(app, 'consumer.ts'),
      `import { App, CfnOutput, Stack } from 'aws-cdk-lib';
import { CampaignReportExporter, type CampaignReportExporterProps } from 'campaign-report-exporter/construct';

const app = new App();
const stack = new Stack(app, 'DataPlatform');
const props: CampaignReportExporterProps = {
  apiBaseUrl: 'https://api.acme.com',
  stage: 'analytics',
  scheduleTimeZone: 'Europe/Berlin',
  tableFormat: 'iceberg',
  reportBatchSize: 2,
};
const reports = new CampaignReportExporter(stack, 'Reports', props);
for (const output of reports.outputs) {
  new CfnOutput(stack, \`Reports\${output.name}\`, { value: output.value, description: output.description });
}
const bucketName: string = reports.dataLake.bucket.bucketName;
const startRun: string = reports.functions.byName['start-run'].functionName;
const topic: string = reports.monitoring.topic.topicArn;
const policy: string = reports.analystPolicy.managedPolicyArn;
const days: number = reports.config.logRetentionDays;
void [bucketName, startRun, topic, policy, days];
// @ts-expect-error apiBaseUrl is required
new CampaignReportExporter(stack, 'NoUrl', {});
// @ts-expect-error tableFormat is 'hive' or 'iceberg'
new CampaignReportExporter(stack, 'BadFormat', { apiBaseUrl: 'https://api.acme.com', tableFormat: 'delta' });
`,
    );
    // skipLibCheck, as CDK apps have it (aws-cdk-lib's own .d.ts need ESNext.Disposable without
    // it); the package's .d.ts is checked all the same, as a copy among the sources (a wrong
    // import there would otherwise make its types `any` without a word). A fifth of the time of
    // checking aws-cdk-lib's declarations too.
    await copyFile(
      join(app, 'node_modules', 'campaign-report-exporter', 'dist', 'construct.d.ts'),
      join(app, 'package-types.ts'),
    );
    await writeFile(
      join(app, 'tsconfig.json'),
      JSON.stringify({
        compilerOptions: {
          target: 'ES2022',
          module: 'NodeNext',
          moduleResolution: 'NodeNext',
          strict: true,
          noEmit: true,
          skipLibCheck: true,
          types: [],
        },
        files: ['consumer.ts', 'package-types.ts'],
      }),
    );
    const tsc = join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc');
    const checked = await run(process.execPath, [tsc, '-p', 'tsconfig.json'], { cwd: app }).then(
      () => '',
      (error: { stdout: string }) => error.stdout,
    );
    expect(checked).toBe('');
  });
});

describe('the CLI installed into a fresh prefix', () => {
  let prefix: string;
  let simulator: ChildProcess | undefined;

  beforeAll(async () => {
    prefix = join(work, 'prefix');
    await npm(['install', '--global', '--prefix', prefix, ...NPM_FLAGS, tarball], work);
  }, INSTALL_TIMEOUT_MS);

  afterEach(() => {
    if (simulator && simulator.exitCode === null) simulator.kill('SIGKILL');
  });

  it('installs the package alone: the optional peers for the construct are not fetched', async () => {
    expect(await readdir(join(prefix, 'lib', 'node_modules'))).toEqual(['campaign-report-exporter']);
    // npm puts a global package's dependencies, peers included, under its own folder.
    const nested = await readdir(
      join(prefix, 'lib', 'node_modules', 'campaign-report-exporter', 'node_modules'),
    ).catch((error: NodeJS.ErrnoException) => (error.code === 'ENOENT' ? [] : Promise.reject(error)));
    expect(nested).toEqual([]);
  });

  it('runs its bin: --version, then an export from the simulator into a folder', async () => {
    const bin = join(prefix, 'bin', 'campaign-report-exporter');
    // The bin itself, by its `#!/usr/bin/env node` line: the tests' Node is the first on PATH.
    const env = { PATH: BARE_PATH, HOME: work };
    const { stdout: printed } = await run(bin, ['--version'], { env });
    expect(printed).toBe(`${version}\n`);

    simulator = spawn(bin, ['simulator', '--port', '0', '--seed', '4', '--campaigns', '2', '--jobs', '3'], {
      env,
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    const [line] = (await once(createInterface({ input: simulator.stdout! }), 'line')) as [string];
    const { url, keys } = JSON.parse(line) as { url: string; keys: { valid: string } };
    expect(new URL(url).hostname).toBe('127.0.0.1');
    const out = join(work, 'exported');
    const { stdout } = await run(bin, ['export', '--out', out, '--date', '2026-01-03'], {
      env: { ...env, INTEGRATION_API_BASE_URL: url, INTEGRATION_API_KEY: keys.valid },
    });
    expect(stdout).toMatch(/status\s+succeeded/);
    const manifests = await readdir(join(out, 'runs', 'dt=2026-01-03'));
    expect(manifests).toHaveLength(1);
    const manifest = JSON.parse(
      await readFile(join(out, 'runs', 'dt=2026-01-03', manifests[0]!), 'utf8'),
    ) as {
      status: string;
      counts: { campaigns: number; jobs: number };
    };
    expect(manifest).toMatchObject({ status: 'succeeded', counts: { campaigns: 2, jobs: 6 } });
  });
});
