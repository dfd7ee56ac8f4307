/**
 * finish-run of an Iceberg stack (TABLE_FORMAT=iceberg, GLUE_DATABASE) through the handler and
 * its runtime (functions/aws/runtime.ts builds the Glue catalog): the run commits to the stack's
 * Glue tables and the output records Glue with the database and the function's region; a CLI
 * run into the same bucket then commits to those Glue tables too. Glue is the stateful fake.
 */
import { EventBridgeClient, PutEventsCommand } from '@aws-sdk/client-eventbridge';
import { GlueClient } from '@aws-sdk/client-glue';
import { mockClient } from 'aws-sdk-client-mock';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { exportCommand } from '../../../../functions/cli/export-command.js';
import { exportUnit } from '../../../../shared/export/run/export-unit.js';
import { planCampaign } from '../../../../shared/export/run/plan-campaign.js';
import { startRun } from '../../../../shared/export/run/start-run.js';
import { GLUE_PARAMETERS } from '../../../../shared/iceberg/glue-parameters.js';
import { STATE_KEYS } from '../../../../shared/layout.js';
import { S3Storage } from '../../../../shared/storage/s3.js';
import { Captured } from '../../../helpers/cli.js';
import { createStackTables, GlueFake } from '../../../helpers/glue-fake.js';
import { readIcebergTableAt } from '../../../helpers/icebird.js';
import { BUCKET, context, PREFIX, startTestbed, type Testbed } from './testbed.js';

const DB = 'exporter_prod';
const DT = '2026-11-22';

describe('finish-run of an Iceberg stack', () => {
  const glue = mockClient(GlueClient);
  const events = mockClient(EventBridgeClient);
  let fake: GlueFake;
  let bed: Testbed;

  beforeAll(async () => {
    bed = await startTestbed({
      simulator: { campaigns: 1, jobsPerCampaign: 4 },
      env: { TABLE_FORMAT: 'iceberg', GLUE_DATABASE: DB },
    });
    fake = new GlueFake(glue);
    await createStackTables(fake, DB, bed.storage);
    events.on(PutEventsCommand).resolves({ FailedEntryCount: 0, Entries: [{ EventId: 'e-1' }] });
  });
  afterAll(async () => {
    glue.restore();
    events.restore();
    await bed?.close();
  });

  /** Athena's view of `reports`: the rows at the Glue table's pointer, per run id. */
  async function reportsByRun(): Promise<Map<string, number>> {
    const pointer = fake.table(DB, 'reports').Parameters?.[GLUE_PARAMETERS.metadataLocation];
    const bucket = new S3Storage({ bucket: BUCKET, client: bed.aws.s3Client() });
    const rows = await readIcebergTableAt(pointer!, async (_, key) => (await bucket.get(key))?.body);
    const byRun = new Map<string, number>();
    for (const row of rows) byRun.set(String(row.run_id), (byRun.get(String(row.run_id)) ?? 0) + 1);
    return byRun;
  }

  it('commits to Glue and records it; a CLI run into the bucket then commits to Glue too', async () => {
    const runtime = await import('../../../../functions/aws/runtime.js');
    const deps = runtime.exportDeps({ apiKey: bed.sim.keys.valid });
    const started = await startRun(deps, {
      mode: 'full',
      dt: DT,
      tableFormat: 'iceberg',
      driver: 'queues',
      lock: 'unlocked',
    });
    for (const campaignId of started.record.campaign_ids) {
      const planned = await planCampaign(deps, { ...started.run, campaign_id: campaignId }, 5);
      for (const unit of planned.units) await exportUnit(deps, unit, { resume: true });
    }
    const { handler } = await import('../../../../functions/aws/finish-run.js');
    const finished = await (
      handler as unknown as (e: unknown, c: unknown) => Promise<{ finished: string[] }>
    )({}, context('finish-run'));
    expect(finished.finished).toEqual([started.run.run_id]);
    const record = JSON.parse(
      Buffer.from((await bed.storage.get(STATE_KEYS.tableFormat))!.body).toString('utf8'),
    );
    expect(record).toMatchObject({
      table_format: 'iceberg',
      catalog: { kind: 'glue', database: DB, region: bed.aws.region },
    });
    expect((await reportsByRun()).get(started.run.run_id)).toBeGreaterThan(0);

    bed.sim.dataset.addJob(bed.sim.dataset.campaigns[0]!.id);
    const stderr = new Captured();
    const code = await exportCommand(
      [
        '--out',
        `s3://${BUCKET}/${PREFIX}`,
        '--s3-endpoint',
        bed.aws.endpoint,
        '--table-format',
        'iceberg',
        '--quiet',
      ],
      { INTEGRATION_API_BASE_URL: bed.sim.url, INTEGRATION_API_KEY: bed.sim.keys.valid },
      { stdout: new Captured(), stderr, cwd: '/' },
    );
    expect(stderr.lines()).toEqual([]);
    expect(code).toBe(0);
    const byRun = await reportsByRun();
    expect(byRun.size).toBe(2);
    expect([...byRun.keys()].filter((run) => run !== started.run.run_id)).toHaveLength(1);
  });
});
