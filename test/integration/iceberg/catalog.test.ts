/**
 * One table, one catalog: stack runs (the core with the Glue catalog, as finish-run commits)
 * and CLI runs (the export command, in process) alternate into one bucket of a local S3 server,
 * the Glue Data Catalog a stateful fake. What Athena reads, the table at Glue's
 * `metadata_location`, is read back with icebird and must hold every run's rows.
 */

import { PassThrough } from 'node:stream';
import { GlueClient } from '@aws-sdk/client-glue';
import { mockClient } from 'aws-sdk-client-mock';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest';
import { exportCommand } from '../../../functions/cli/export-command.js';
import { sqlCommand } from '../../../functions/cli/sql-command.js';
import { runExport } from '../../../shared/export/run/local-run.js';
import type { Manifest } from '../../../shared/export/state/manifest.js';
import { GlueCatalog } from '../../../shared/iceberg/glue-catalog.js';
import { GLUE_PARAMETERS } from '../../../shared/iceberg/glue-parameters.js';
import type { IcebergTableName } from '../../../shared/iceberg/schema.js';
import { STATE_KEYS } from '../../../shared/layout.js';
import { S3Storage } from '../../../shared/storage/s3.js';
import { Captured } from '../../helpers/cli.js';
import { exporter } from '../../helpers/export.js';
import { type LocalAws, startLocalAws } from '../../helpers/fauxqs.js';
import { createStackTables, GlueFake } from '../../helpers/glue-fake.js';
import { readIcebergTableAt } from '../../helpers/icebird.js';
import { type Simulator, startSimulator } from '../../simulator/index.js';

const DB = 'exporter_prod';
const REGION = 'eu-west-1';
const BUCKET = 'lake';
const glue = mockClient(GlueClient);

let aws: LocalAws;
let simulator: Simulator;
let fake: GlueFake;

beforeAll(async () => {
  aws = await startLocalAws();
  await aws.createBucket(BUCKET);
  simulator = await startSimulator({ seed: 28, campaigns: 2, jobsPerCampaign: 4, reportSize: 'small' });
});
afterAll(async () => {
  await simulator?.close();
  await aws?.close();
});
beforeEach(() => {
  glue.reset();
  fake = new GlueFake(glue);
  // The CLI's S3 and Glue clients find their credentials in the environment, as a user's do.
  vi.stubEnv('AWS_ACCESS_KEY_ID', aws.credentials.accessKeyId);
  vi.stubEnv('AWS_SECRET_ACCESS_KEY', aws.credentials.secretAccessKey);
  vi.stubEnv('AWS_EC2_METADATA_DISABLED', 'true');
});
afterEach(() => {
  vi.unstubAllEnvs();
});

const storageOf = (prefix: string) => new S3Storage({ bucket: BUCKET, prefix, client: aws.s3Client() });

/** What deploying the stack with tableFormat=iceberg does to the bucket and Glue. */
const deployStack = (prefix: string) => createStackTables(fake, DB, storageOf(prefix));

/** A run of the stack: the core with the Glue catalog over the bucket, as the Lambdas build it (runtime.ts). */
async function stackRun(prefix: string, mode: 'full' | 'incremental' = 'incremental'): Promise<Manifest> {
  const storage = storageOf(prefix);
  const target = exporter(simulator, `s3://${BUCKET}/${prefix}`, { storage });
  const catalog = new GlueCatalog({ client: new GlueClient({ region: REGION }), databaseName: DB, storage });
  return runExport({ ...target.deps, catalog }, { mode, tableFormat: 'iceberg' });
}

/** A run of the export command into the bucket; its exit code, stderr and manifest. */
async function cliRun(prefix: string, ...flags: string[]) {
  const stdout = new Captured();
  const stderr = new Captured();
  const before = new Set(await manifestKeys(prefix));
  const code = await exportCommand(
    [
      '--out',
      `s3://${BUCKET}/${prefix}`,
      '--s3-endpoint',
      aws.endpoint,
      '--table-format',
      'iceberg',
      '--quiet',
      ...flags,
    ],
    { INTEGRATION_API_BASE_URL: simulator.url, INTEGRATION_API_KEY: simulator.keys.valid },
    { stdout, stderr, cwd: '/' },
  );
  const added = (await manifestKeys(prefix)).filter((k) => !before.has(k));
  const manifest = added.length === 1 ? (JSON.parse(await text(prefix, added[0]!)) as Manifest) : undefined;
  return { code, stderr: stderr.lines(), manifest };
}

async function manifestKeys(prefix: string): Promise<string[]> {
  const keys: string[] = [];
  for await (const key of storageOf(prefix).list('runs/')) if (key.endsWith('.json')) keys.push(key);
  return keys;
}

async function text(prefix: string, key: string): Promise<string> {
  const found = await storageOf(prefix).get(key);
  if (!found) throw new Error(`no ${key}`);
  return Buffer.from(found.body).toString('utf8');
}

/** Athena's view of a table: the table at the Glue table's `metadata_location`, read by icebird. */
async function athenaView(table: IcebergTableName): Promise<Record<string, unknown>[]> {
  const pointer = fake.table(DB, table).Parameters?.[GLUE_PARAMETERS.metadataLocation];
  if (!pointer) throw new Error(`the Glue table ${table} has no pointer`);
  const root = aws.s3Client();
  const bucket = new S3Storage({ bucket: BUCKET, client: root });
  return readIcebergTableAt(pointer, async (name, key) =>
    name === BUCKET ? (await bucket.get(key))?.body : undefined,
  );
}

/** Per run id, the rows of `reports` in Athena's view. */
async function reportsByRun(): Promise<Map<string, number>> {
  const byRun = new Map<string, number>();
  for (const row of await athenaView('reports')) {
    const run = String(row.run_id);
    byRun.set(run, (byRun.get(run) ?? 0) + 1);
  }
  return byRun;
}

const recordOf = async (prefix: string) => JSON.parse(await text(prefix, STATE_KEYS.tableFormat));
const newJob = () => simulator.dataset.addJob(simulator.dataset.campaigns[0]!.id).id;

describe('one table, one catalog', () => {
  it('stack and CLI runs alternating into one bucket all reach the tables Athena reads', async () => {
    const prefix = 'mixed';
    await deployStack(prefix);
    const runs: Manifest[] = [await stackRun(prefix, 'full')];
    expect(await recordOf(prefix)).toMatchObject({
      table_format: 'iceberg',
      catalog: { kind: 'glue', database: DB, region: REGION },
    });

    const added = [newJob()];
    const cli = await cliRun(prefix);
    expect(cli.stderr).toEqual([]);
    expect(cli.code).toBe(0);
    expect(cli.manifest?.iceberg?.catalog).toBe('glue');
    runs.push(cli.manifest!);

    added.push(newJob());
    runs.push(await stackRun(prefix));
    added.push(newJob());
    const again = await cliRun(prefix);
    expect(again.code).toBe(0);
    runs.push(again.manifest!);

    // Every run that exported reports has exactly its rows in Athena's view; the file catalog has none.
    const byRun = await reportsByRun();
    for (const run of runs) {
      expect(run.counts.reports_exported).toBeGreaterThan(0);
      expect(byRun.get(run.run_id)).toBe(run.counts.reports_exported);
    }
    const current = await athenaView('reports_current');
    const jobs = current.map((r) => Number(r.job_id));
    expect(new Set(jobs).size).toBe(jobs.length);
    expect(jobs).toEqual(expect.arrayContaining(added));
    // The sql command over the bucket reads the tables where Athena does.
    const stdout = new Captured();
    const sqlCode = await sqlCommand(
      ['--out', `s3://${BUCKET}/${prefix}`, '--s3-endpoint', aws.endpoint, '--format', 'csv', '-c'].concat(
        'SELECT (SELECT count(*) FROM reports) AS history, (SELECT count(*) FROM reports_current) AS current',
      ),
      {},
      { stdout, stderr: new Captured(), stdin: new PassThrough().end(''), cwd: '/' },
    );
    expect(sqlCode).toBe(0);
    const history = [...byRun.values()].reduce((a, b) => a + b, 0);
    expect(stdout.text.split('\r\n')[1]).toBe(`${history},${current.length}`);
    const fileCatalog: string[] = [];
    for await (const key of storageOf(prefix).list('iceberg/reports/metadata/v')) fileCatalog.push(key);
    expect(fileCatalog).toEqual([]);
  });

  it.each([
    ['', true],
    [', its pointer records (state/iceberg/) lost', false],
  ])(
    'a stack deployed onto an output the CLI wrote%s takes its tables over, and the CLI then commits to Glue',
    async (_, pointers) => {
      const prefix = `cli-first-${pointers}`;
      const first = await cliRun(prefix, '--full');
      expect(first.code).toBe(0);
      expect(first.manifest?.iceberg?.catalog).toBe('file');
      expect(await recordOf(prefix)).toMatchObject({ catalog: { kind: 'file' } });
      if (!pointers) {
        const keys: string[] = [];
        for await (const key of storageOf(prefix).list('state/iceberg/')) keys.push(key);
        expect(keys.length).toBeGreaterThan(0);
        await storageOf(prefix).delete(keys);
      }

      await deployStack(prefix);
      newJob();
      const stack = await stackRun(prefix);
      expect(stack.iceberg?.catalog).toBe('glue');
      expect(await recordOf(prefix)).toMatchObject({
        catalog: { kind: 'glue', database: DB, region: REGION },
      });
      newJob();
      const cli = await cliRun(prefix);
      expect(cli.code).toBe(0);
      expect(cli.manifest?.iceberg?.catalog).toBe('glue');

      const byRun = await reportsByRun();
      for (const run of [first.manifest!, stack, cli.manifest!])
        expect(byRun.get(run.run_id)).toBe(run.counts.reports_exported);
    },
  );

  it("refuses a CLI run into a stack's output that records no database, with one line, until told", async () => {
    const prefix = 'old-stack';
    await deployStack(prefix);
    await stackRun(prefix, 'full');
    // As a stack of the release before this record wrote it.
    const { catalog: _, ...older } = await recordOf(prefix);
    await storageOf(prefix).put(STATE_KEYS.tableFormat, `${JSON.stringify(older)}\n`);
    simulator.resetStats();

    const refused = await cliRun(prefix);
    expect(refused.code).toBe(2);
    expect(refused.stderr).toHaveLength(1);
    expect(refused.stderr[0]).toMatch(/registered in Glue .*--glue-database/);
    expect(simulator.stats.total).toBe(0);

    newJob();
    const told = await cliRun(prefix, '--glue-database', DB, '--glue-region', REGION);
    expect(told.code).toBe(0);
    expect(told.manifest?.iceberg?.catalog).toBe('glue');
    expect((await reportsByRun()).get(told.manifest!.run_id)).toBe(told.manifest!.counts.reports_exported);
  });

  it('refuses a run with the file catalog into an output registered in Glue, before it commits', async () => {
    const prefix = 'guard';
    await deployStack(prefix);
    await stackRun(prefix, 'full');
    const pointer = fake.table(DB, 'reports').Parameters?.[GLUE_PARAMETERS.metadataLocation];
    newJob();
    const storage = storageOf(prefix);
    const target = exporter(simulator, `s3://${BUCKET}/${prefix}`, { storage });
    await expect(runExport(target.deps, { mode: 'incremental', tableFormat: 'iceberg' })).rejects.toThrow(
      /registered in the Glue database exporter_prod \(eu-west-1\).*file catalog/,
    );
    expect(fake.table(DB, 'reports').Parameters?.[GLUE_PARAMETERS.metadataLocation]).toBe(pointer);
  });

  it('says which Glue database it cannot use, in one line, before the run starts', async () => {
    const prefix = 'wrong-db';
    await deployStack(prefix);
    await stackRun(prefix, 'full');
    simulator.resetStats();
    const r = await cliRun(prefix, '--glue-database', 'nope');
    expect(r.code).toBe(2);
    expect(r.stderr).toHaveLength(1);
    expect(r.stderr[0]).toMatch(
      /cannot use the Glue database nope \(eu-west-1\).*nope\.reports does not exist/,
    );
    expect(simulator.stats.total).toBe(0);
  });

  it('says when no AWS credentials reach Glue, in one line, before the run starts', async () => {
    const prefix = 'no-credentials';
    await deployStack(prefix);
    await stackRun(prefix, 'full');
    const { cliCatalog } = await import('../../../functions/cli/catalog.js');
    vi.stubEnv('AWS_ACCESS_KEY_ID', '');
    vi.stubEnv('AWS_SECRET_ACCESS_KEY', '');
    vi.stubEnv('AWS_PROFILE', 'none');
    vi.stubEnv('AWS_CONFIG_FILE', '/nonexistent/aws-config');
    vi.stubEnv('AWS_SHARED_CREDENTIALS_FILE', '/nonexistent/aws-credentials');
    await expect(cliCatalog(storageOf(prefix), { tableFormat: 'iceberg' })).rejects.toThrow(
      /^no AWS credentials for the Glue database exporter_prod \(eu-west-1\) .*: set AWS_PROFILE/,
    );
  });
});
