/**
 * The export command as a child process with --out on S3 (fauxqs on 127.0.0.1), where the AWS
 * SDK finds its credentials in the real environment: the scheme in any case names S3, and no
 * credentials stop the run before the first API request.
 */
import { execFile } from 'node:child_process';
import { readdir } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { S3Storage } from '../../../shared/storage/s3.js';
import { listAll } from '../../../shared/storage/storage.js';
import { tempDir } from '../../helpers/export.js';
import { type LocalAws, startLocalAws } from '../../helpers/fauxqs.js';
import { listPage, reportData, verifyAnswer } from '../../unit/api/fixtures.js';
import { startServer, type TestServer } from '../api/server.js';

const ROOT = resolve(import.meta.dirname, '../../..');
const TSX = join(ROOT, 'node_modules/tsx/dist/cli.mjs');
const EXPORT = join(ROOT, 'functions/cli/export.ts');

/** The environment less every AWS_ variable and the API's, and no way to find credentials. */
function bareEnv(): NodeJS.ProcessEnv {
  const env = Object.fromEntries(
    Object.entries(process.env).filter(
      ([name]) => !name.startsWith('AWS_') && !name.startsWith('INTEGRATION_API_'),
    ),
  );
  return {
    ...env,
    INIT_CWD: undefined,
    AWS_EC2_METADATA_DISABLED: 'true',
    AWS_CONFIG_FILE: '/nonexistent/aws-config',
    AWS_SHARED_CREDENTIALS_FILE: '/nonexistent/aws-credentials',
  };
}

async function cli(args: string[], env: NodeJS.ProcessEnv, cwd: string) {
  return promisify(execFile)(process.execPath, [TSX, EXPORT, ...args], { env, cwd }).then(
    (r) => ({ code: 0, stdout: r.stdout, stderr: r.stderr }),
    (e: { code: number; stdout: string; stderr: string }) => ({
      code: e.code,
      stdout: e.stdout,
      stderr: e.stderr,
    }),
  );
}

let aws: LocalAws;
let api: TestServer;
beforeAll(async () => {
  aws = await startLocalAws();
  await aws.createBucket('lake');
  api = await startServer((request) => {
    if (request.path.endsWith('/verify')) return { body: verifyAnswer() };
    if (request.path.endsWith('/campaigns')) return { body: listPage([{ id: 7 }], 1, 1) };
    if (request.path.endsWith('/jobs')) return { body: listPage([{ id: 101 }], 1, 1) };
    return { body: { data: reportData(101) } };
  });
});
afterAll(async () => {
  await api?.close();
  await aws?.close();
});

describe('export to S3, as a child process', () => {
  it('writes to the bucket for --out S3://lake/p, and makes no folder named S3:', async () => {
    const cwd = await tempDir('cwd');
    const env = {
      ...bareEnv(),
      AWS_ACCESS_KEY_ID: aws.credentials.accessKeyId,
      AWS_SECRET_ACCESS_KEY: aws.credentials.secretAccessKey,
      INTEGRATION_API_BASE_URL: api.url,
      INTEGRATION_API_KEY: 'sk_test_key',
    };
    const r = await cli(
      ['--out', 'S3://lake/upper', '--s3-endpoint', aws.endpoint, '--date', '2026-11-22'],
      env,
      cwd,
    );

    expect(r.stderr).not.toMatch(/^error/m);
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/^ {2}output\s+s3:\/\/lake\/upper$/m);
    const keys = await listAll(
      new S3Storage({ bucket: 'lake', prefix: 'upper', client: aws.s3Client() }),
      'runs/',
    );
    expect(keys).toEqual([expect.stringMatching(/^runs\/dt=2026-11-22\/.+\.json$/)]);
    expect(await readdir(cwd)).toEqual([]);
  });

  it('exits 1 with one line naming --out when no AWS credentials are found, before any API request', async () => {
    const before = api.requests.length;
    const env = { ...bareEnv(), INTEGRATION_API_BASE_URL: api.url, INTEGRATION_API_KEY: 'sk_test_key' };
    const r = await cli(
      ['--out', 's3://lake/nocreds', '--s3-endpoint', aws.endpoint],
      env,
      await tempDir('cwd'),
    );

    expect(r.code).toBe(1);
    expect(r.stdout).toBe('');
    expect(r.stderr).toBe(
      'error: --out s3://lake/nocreds cannot be reached: no AWS credentials found. set AWS_PROFILE, or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or run where a role provides them\n',
    );
    expect(api.requests.length).toBe(before);
  });
});

describe('the `npm run export` entry, as a child process', () => {
  it('takes a relative --out from INIT_CWD, where `npm run` was started, not from the package root', async () => {
    const caller = await tempDir('caller');
    const packageRoot = await tempDir('package-root');
    const env = {
      ...bareEnv(),
      INIT_CWD: caller,
      INTEGRATION_API_BASE_URL: api.url,
      INTEGRATION_API_KEY: 'sk_test_key',
    };
    const r = await cli(['--out', 'exports/acme', '--date', '2026-11-22', '--quiet'], env, packageRoot);

    expect(r.code).toBe(0);
    expect(await readdir(join(caller, 'exports', 'acme', 'runs', 'dt=2026-11-22'))).toHaveLength(1);
    expect(await readdir(packageRoot)).toEqual([]);
  });
});
