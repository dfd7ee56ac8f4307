/**
 * The AWS topology end to end on loopback: the simulator as the API, fauxqs as S3 and SQS with
 * the stack's queue settings (DLQ, maxReceiveCount, visibility scaled down), and the real
 * handlers fed by a poller that behaves like Lambda's SQS event source mapping. Secrets Manager
 * and EventBridge, which have no local server, are mocked.
 */
import { EventBridgeClient, PutEventsCommand } from '@aws-sdk/client-eventbridge';
import { GetSecretValueCommand, SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import {
  DeleteMessageCommand,
  type SendMessageBatchCommandInput,
  SendMessageCommand,
} from '@aws-sdk/client-sqs';
import { mockClient } from 'aws-sdk-client-mock';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import type { DriftEntry } from '../../../shared/export/schema-drift.js';
import type { Manifest } from '../../../shared/export/state/manifest.js';
import { REPORT_TABLES } from '../../../shared/export/tables.js';
import { type DuckDb, openDuckDb } from '../../helpers/duckdb.js';
import { startDynalite } from '../../helpers/dynalite.js';
import { exporter, tempDir } from '../../helpers/export.js';
import { type LocalAws, startLocalAws } from '../../helpers/fauxqs.js';
import { useIamGuard } from '../../helpers/iam/hooks.js';
import { openRunKeys } from '../../helpers/records.js';
import { type Simulator, type SimulatorOptions, startSimulator } from '../../simulator/index.js';
import { DRIFT_CHANGES, type DriftChange } from '../../simulator/types.js';
import {
  asContainer,
  type Container,
  type Containers,
  LoopbackTopology,
  type OutputSnapshot,
  snapshotOutput,
  stackSettings,
  type TopologyOptions,
  type TopologyRun,
} from './loopback.js';
import { fakeContext } from './poller.js';

/** Small units, so that a small dataset still makes many units and batches. */
const SETTINGS = stackSettings({ unitSize: 5 });
const REPORT_WORKERS = 2;
const BUCKET = 'data-lake';

/**
 * Every kind of outcome: exported, not ready (3 reasons), try later then exported, forbidden,
 * and a report the spec does not describe (quarantined under freeze; it lands under evolve,
 * the stack's default).
 */
const DATA: SimulatorOptions = {
  seed: 11,
  campaigns: 3,
  jobsPerCampaign: 12,
  reportSize: 'small',
  unpublishedShare: 0.1,
  surveyMissingJobs: 1,
  noSectionsJobs: 1,
  tryLaterJobs: 1,
  tryLaterAttempts: 1,
  invalidReportJobs: 1,
  forbiddenReportJobs: 1,
};

const outcomes = (m: Manifest) =>
  m.counts.reports_exported +
  m.counts.reports_unchanged +
  m.counts.reports_not_ready +
  m.counts.reports_not_found +
  m.counts.reports_invalid +
  m.counts.reports_failed;

/** The keys of the run manifests written so far, in run order. */
async function manifestKeys(topo: LoopbackTopology): Promise<string[]> {
  const keys: string[] = [];
  for await (const key of topo.storage().list('runs/')) keys.push(key);
  return keys.sort();
}

describe('the AWS topology on loopback', () => {
  const secrets = mockClient(SecretsManagerClient);
  const events = mockClient(EventBridgeClient);
  // Every test fails on an AWS call the stack's IAM would deny (after the mocks: in front of them).
  const iam = useIamGuard();
  let aws: LocalAws;
  let db: DuckDb;
  const simulators: Simulator[] = [];
  let baseline: { run: TopologyRun; manifest: Manifest; output: OutputSnapshot };

  /** A fresh module registry per container: its own rate limiter, clients and secret cache, as in AWS. */
  const loadContainer = async (): Promise<Container> => {
    vi.resetModules();
    return asContainer(await import('./container.js'), iam());
  };

  async function simulator(options: SimulatorOptions = {}): Promise<Simulator> {
    const sim = await startSimulator({ ...DATA, ...options });
    simulators.push(sim);
    return sim;
  }

  /** Queues and containers of one topology; the key in the (mocked) secret is the simulator's. */
  async function topology(
    name: string,
    sim: Simulator,
    options: Pick<TopologyOptions, 'requestBudget' | 'settings' | 'env'> = {},
  ): Promise<{ topo: LoopbackTopology; containers: Containers }> {
    secrets.on(GetSecretValueCommand).resolves({ SecretString: sim.keys.valid });
    const topo = await LoopbackTopology.create({
      aws,
      apiBaseUrl: sim.url,
      bucket: BUCKET,
      name,
      settings: SETTINGS,
      iam: iam(),
      ...options,
    });
    topo.applyEnv();
    // One at a time: concurrent imports after resetModules would share one module instance.
    const start = await loadContainer();
    const plan = [await loadContainer(), await loadContainer()];
    const report: Container[] = [];
    for (let i = 0; i < REPORT_WORKERS; i++) report.push(await loadContainer());
    const containers: Containers = { start, plan, report, finish: await loadContainer() };
    topo.attachAll(containers);
    return { topo, containers };
  }

  beforeAll(async () => {
    events.on(PutEventsCommand).resolves({ FailedEntryCount: 0, Entries: [{ EventId: 'e-1' }] });
    aws = await startLocalAws();
    db = await openDuckDb();
    const sim = await simulator();
    const { topo, containers } = await topology('baseline', sim);
    const run = await topo.run(containers);
    if (!run.manifest) throw new Error('the baseline run wrote no manifest');
    baseline = { run, manifest: run.manifest, output: await snapshotOutput(topo.storage(), db) };
  });

  afterAll(async () => {
    await Promise.all(simulators.map((s) => s.close()));
    await aws?.close();
    await db?.close();
    secrets.restore();
    events.restore();
  });

  it('closes the run with every listed job counted once and announces it on EventBridge', () => {
    const { manifest, run } = baseline;
    expect(manifest.status).toBe('partial'); // the forbidden report
    expect(manifest.counts.campaigns).toBe(3);
    expect(manifest.counts.jobs).toBe(36);
    expect(outcomes(manifest)).toBe(36);
    // The report the spec does not describe landed (evolve), its drift reported.
    expect(manifest.schema_contract).toBe('evolve');
    expect(manifest.counts.reports_invalid).toBe(0);
    expect(manifest.schema_drift).not.toEqual([]);
    expect(manifest.counts.reports_failed).toBe(1);
    expect(run.finished).toEqual({ finished: [run.runId] });
    const announced = events
      .commandCalls(PutEventsCommand)
      .map((c) => JSON.parse(c.args[0].input.Entries?.[0]?.Detail ?? '{}'));
    expect(announced).toContainEqual(
      expect.objectContaining({ run_id: run.runId, counts: manifest.counts, status: 'partial' }),
    );
    // 36 jobs in units of 5: 3 per campaign, 9 messages, in batches of the stack's batch size.
    const reportDeliveries = run.poll.deliveries.filter((d) => d.functionName === 'export-reports');
    expect(reportDeliveries).toHaveLength(9);
    expect(reportDeliveries.every((d) => d.result === 'deleted')).toBe(true);
  });

  it('writes to S3 what the CLI writes to a folder for the same data', async () => {
    const sim = await simulator();
    const cli = exporter(sim, await tempDir('cli'));
    const manifest = await cli.run({ schemaContract: 'evolve' });
    const output = await snapshotOutput(cli.deps.storage, db);

    expect(baseline.manifest.counts).toEqual(manifest.counts);
    expect(baseline.manifest.status).toBe(manifest.status);
    for (const [table, rows] of Object.entries(output)) {
      expect(baseline.output[table], `${table} rows`).toEqual(rows);
    }
    for (const table of [...REPORT_TABLES, 'campaigns', 'jobs'])
      expect(output[table], table).not.toHaveLength(0);
  });

  it('moves a poison message to the DLQ after maxReceiveCount deliveries and loses nothing else', async () => {
    const sim = await simulator();
    const { topo, containers } = await topology('poison', sim);
    const sqs = aws.sqsClient();
    const poison = await sqs.send(
      new SendMessageCommand({ QueueUrl: topo.report.url, MessageBody: '{"unit": not json' }),
    );

    const run = await topo.run(containers);

    const deliveries = run.poll.deliveries.filter((d) => d.messageId === poison.MessageId);
    expect(deliveries.map((d) => d.result)).toEqual(Array(SETTINGS.maxReceiveCount).fill('failed'));
    const dead = await topo.deadLetters(topo.report);
    expect(dead.map((m) => m.Body)).toEqual(['{"unit": not json']);
    expect(await topo.deadLetters(topo.plan)).toEqual([]);
    expect(run.manifest?.counts).toEqual(baseline.manifest.counts);
    expect(await snapshotOutput(topo.storage(), db)).toEqual(baseline.output);
  }, 45_000);

  it('loses nothing to 429s from a tight rate limit and to 5xx and resets', async () => {
    const sim = await simulator({
      rateLimit: { ratePerSecond: 10, burst: 2 },
      faults: { serverError: 0.05, reset: 0.02 },
    });
    // One report refused eight times in a row: the client gives up, the unit goes back to the queue.
    const job = sim.dataset.campaigns[1]?.jobs.find(
      (j) => j.state === 'published' && !j.invalid && !j.forbidden && j.tryLaterAttempts === 0,
    );
    if (!job) throw new Error('dataset has no plain published job');
    sim.failNext(new RegExp(`/jobs/${job.id}/report$`), '429', 8);
    const { topo, containers } = await topology('faults', sim);

    const run = await topo.run(containers);

    expect(sim.stats.byStatus['429']).toBeGreaterThan(8);
    expect(
      (sim.stats.byStatus['500'] ?? 0) + (sim.stats.byStatus['502'] ?? 0) + (sim.stats.byStatus['503'] ?? 0),
    ).toBeGreaterThan(0);
    expect(topo.handBacks.length).toBeGreaterThan(0);
    expect(run.poll.deliveries.some((d) => d.functionName === 'export-reports' && d.receiveCount > 1)).toBe(
      true,
    );
    expect(run.manifest?.counts).toEqual(baseline.manifest.counts);
    expect(outcomes(run.manifest as Manifest)).toBe(36);
    expect(await snapshotOutput(topo.storage(), db)).toEqual(baseline.output);
    expect(await topo.deadLetters(topo.report)).toEqual([]);
  }, 45_000);

  it('keeps every container within one request budget for the deployment (DynamoDB on loopback)', async () => {
    // The API allows 12 req/s; the deployment's ceiling is 10. Five containers with a limiter
    // each at 10 req/s would go past the API's limit and meet 429s; on the shared budget they
    // stay under it together.
    const sim = await simulator({ rateLimit: { ratePerSecond: 12, burst: 3 } });
    const dynamo = await startDynalite();
    try {
      const { topo, containers } = await topology('budget', sim, {
        settings: stackSettings({ unitSize: 5, rateCeiling: 10 }),
        requestBudget: { dynamo, tableName: 'budget-topology' },
      });

      const started = performance.now();
      const run = await topo.run(containers);
      const seconds = (performance.now() - started) / 1000;

      expect(run.manifest?.counts).toEqual(baseline.manifest.counts);
      expect(sim.stats.byStatus['429'] ?? 0).toBe(0);
      // Leased in slices: a few table requests per second whatever the API rate (BENCHMARKS.md,
      // topology: 5 to 11 a second), not one per API request.
      expect(dynamo.requests()).toBeGreaterThan(0);
      expect(dynamo.requests() / seconds).toBeLessThan(20);
    } finally {
      await dynamo.close();
    }
  }, 60_000);

  it('never duplicates rows for a (job_id, run_id) when a unit is delivered again after writing', async () => {
    const sim = await simulator();
    const { topo, containers } = await topology('redelivery', sim);
    // Delivery 1 dies after writing the unit's files, before its summary; delivery 2 writes both and
    // dies before the message is deleted; delivery 3 finds the unit done.
    const summaryFailed = new Set<string>();
    for (const c of containers.report) {
      c.s3.middlewareStack.add(
        (next, context) => async (args) => {
          const key = String((args.input as { Key?: string }).Key ?? '');
          if (
            context.commandName === 'PutObjectCommand' &&
            key.includes('/units/') &&
            !summaryFailed.has(key)
          ) {
            summaryFailed.add(key);
            throw new Error('injected: the container died before writing the unit summary');
          }
          return next(args);
        },
        { step: 'initialize', name: 'dieBeforeSummary' },
      );
    }
    const crashedOnce = new Set<string>();
    const run = await topo.run(
      containers,
      { mode: 'incremental' },
      {
        crashAfter: (mapping, event) => {
          if (mapping.functionName !== 'export-reports') return false;
          const fresh = event.Records.filter(
            (r) => r.attributes.ApproximateReceiveCount === '2' && !crashedOnce.has(r.messageId),
          );
          for (const r of fresh) crashedOnce.add(r.messageId);
          return fresh.length > 0;
        },
      },
    );

    expect(summaryFailed.size).toBe(9);
    expect(crashedOnce.size).toBe(9);
    const output = await snapshotOutput(topo.storage(), db);
    const jobIds = output.reports?.map((row) => (JSON.parse(row) as { job_id: string }).job_id) ?? [];
    expect(new Set(jobIds).size).toBe(jobIds.length);
    expect(output).toEqual(baseline.output);
    expect(run.manifest?.counts).toEqual(baseline.manifest.counts);
  }, 45_000);

  it('publishes one file per table and raw entity, exactly the files its manifest lists, and leaves no staging', async () => {
    const sim = await simulator();
    const { topo, containers } = await topology('publish', sim);

    const run = await topo.run(containers);

    const storage = topo.storage();
    const listed: string[] = [];
    for await (const key of storage.list('')) if (/^(parquet|raw)\//.test(key)) listed.push(key);
    const files = run.manifest?.files ?? [];
    expect(listed.sort()).toEqual(files.map((f) => f.key).sort());
    const perTable = files.map((f) => `${f.format}:${f.table_or_entity}`);
    expect(new Set(perTable).size).toBe(perTable.length);
    const staged: string[] = [];
    for await (const key of storage.list('state/runs/')) staged.push(key);
    // A closed run keeps only its tombstone (a day), so that late deliveries change nothing.
    expect(openRunKeys(staged)).toEqual([]);
    expect(run.manifest?.company_name).toBe(sim.dataset.company);
  });

  it('closes a run once when finish-run is invoked twice at once', async () => {
    const sim = await simulator();
    const { topo, containers } = await topology('two-finishers', sim);
    const second = await loadContainer();
    topo.attach(second);

    const run = await topo.run(containers, { mode: 'incremental' }, {}, [second]);

    expect(run.manifest?.counts).toEqual(baseline.manifest.counts);
    expect(await snapshotOutput(topo.storage(), db)).toEqual(baseline.output);
    const staged: string[] = [];
    for await (const key of topo.storage().list('state/runs/')) staged.push(key);
    expect(openRunKeys(staged)).toEqual([]);
  }, 45_000);

  it('starts one run per scheduled time when Scheduler delivers a time twice at once', async () => {
    const sim = await simulator();
    const { topo, containers } = await topology('scheduled', sim);
    const twin = await loadContainer();
    topo.attach(twin);
    const starts: Array<Record<string, unknown>> = [];
    // Each delivery of the schedule reaches a container of its own, at the same moment.
    const start: Container = {
      ...containers.start,
      startRun: async (event, context) => {
        const both = (await Promise.all([
          containers.start.startRun(event, context),
          twin.startRun(event, context),
        ])) as Array<Record<string, unknown>>;
        starts.push(...both);
        return both.find((s) => s.status === 'started') ?? both[0];
      },
    };
    const scheduled = (time: string) => ({ mode: 'incremental', scheduled_time: time });

    const first = await topo.run({ ...containers, start }, scheduled('2026-11-23T02:00:00Z'));
    const runsAfterFirst = await manifestKeys(topo);
    const second = await topo.run({ ...containers, start }, scheduled('2026-11-24T02:00:00Z'));

    expect(starts.map((s) => s.status).sort()).toEqual(['duplicate', 'duplicate', 'started', 'started']);
    expect(runsAfterFirst).toEqual([expect.stringContaining(first.runId)]);
    expect(await manifestKeys(topo)).toEqual(
      [first.runId, second.runId].map((id) => expect.stringContaining(id)),
    );
    expect(first.manifest?.counts).toEqual(baseline.manifest.counts);
    // The second run found every report unchanged: one run per time, each closed once.
    expect(second.manifest?.counts.reports_unchanged).toBe(baseline.manifest.counts.reports_exported);
    const open: string[] = [];
    for await (const key of topo.storage().list('state/runs/')) open.push(key);
    expect(openRunKeys(open)).toEqual([]);
  }, 45_000);

  it('finishes a publish that was cut short on the next look of finish-run', async () => {
    const sim = await simulator();
    const { topo, containers } = await topology('publish-cut', sim);
    let writes = 0;
    containers.finish.s3.middlewareStack.add(
      (next, context) => async (args) => {
        const key = String((args.input as { Key?: string }).Key ?? '');
        const write =
          context.commandName === 'PutObjectCommand' ||
          context.commandName === 'CreateMultipartUploadCommand';
        if (write && /\/(parquet|raw)\//.test(key) && ++writes === 3) {
          throw new Error('injected: finish-run timed out in the middle of publishing');
        }
        return next(args);
      },
      { step: 'initialize', name: 'cutPublish' },
    );

    await expect(topo.run(containers)).rejects.toThrow(/could not be finished/);
    const runId = (await topo.storage().list('state/runs/')[Symbol.asyncIterator]().next()).value?.split(
      '/',
    )[2];
    expect(runId).toBeDefined();
    expect(await topo.manifest(runId!)).toBeUndefined();
    const again = await containers.finish.finishRun(
      {},
      fakeContext({ functionName: 'finish-run', timeoutMs: 120_000 }),
    );

    expect(again).toEqual({ finished: [runId] });
    expect((await topo.manifest(runId!))?.counts).toEqual(baseline.manifest.counts);
    expect(await snapshotOutput(topo.storage(), db)).toEqual(baseline.output);
  }, 45_000);
  it('handles a unit redriven from the DLQ after its run closed, and dead-letters nothing', async () => {
    const sim = await simulator();
    const { topo, containers } = await topology('redrive', sim);
    const units: string[] = [];
    for (const c of containers.plan)
      c.sqs.middlewareStack.add(
        (next, context) => async (args) => {
          if (context.commandName === 'SendMessageBatchCommand') {
            const input = args.input as SendMessageBatchCommandInput;
            for (const e of input.Entries ?? []) if (e.MessageBody) units.push(e.MessageBody);
          }
          return next(args);
        },
        { step: 'initialize', name: 'recordUnits' },
      );
    const first = await topo.run(containers);
    // One of its units dead-lettered (as after maxReceiveCount failed deliveries), then moved
    // back to the report queue by a redrive (StartMessageMoveTask does receive, send, delete).
    const sqs = aws.sqsClient();
    await sqs.send(new SendMessageCommand({ QueueUrl: topo.report.dlqUrl, MessageBody: units[0] }));
    const [dead] = await topo.deadLetters(topo.report);
    const moved = await sqs.send(
      new SendMessageCommand({ QueueUrl: topo.report.url, MessageBody: dead?.Body }),
    );
    await sqs.send(
      new DeleteMessageCommand({ QueueUrl: topo.report.dlqUrl, ReceiptHandle: dead?.ReceiptHandle }),
    );

    const second = await topo.run(containers);

    expect(first.manifest?.counts).toEqual(baseline.manifest.counts);
    // The closed run's unit is dropped: its run has no record any more, and nothing is written twice.
    const redriven = second.poll.deliveries.filter((d) => d.messageId === moved.MessageId);
    expect(redriven.map((d) => d.result)).toEqual(['deleted']);
    expect(await topo.deadLetters(topo.report)).toEqual([]);
    expect(second.manifest?.counts.reports_unchanged).toBe(baseline.manifest.counts.reports_exported);
    // Each run lists campaigns and jobs again; the reports are those of the first run, once.
    expect((await snapshotOutput(topo.storage(), db)).reports).toEqual(baseline.output.reports);
  }, 45_000);

  describe("when the API changed (the stack's default contract, evolve)", () => {
    const SIZE = {
      campaigns: 2,
      jobsPerCampaign: 5,
      unpublishedShare: 0,
      surveyMissingJobs: 0,
      noSectionsJobs: 0,
    };
    const CALM = { ...SIZE, tryLaterJobs: 0, invalidReportJobs: 0, forbiddenReportJobs: 0 };
    let sim: Simulator;
    let drifted: { manifest: Manifest; output: OutputSnapshot; event: Record<string, unknown> };
    let frozen: Manifest;

    const jobOf = (change: DriftChange) =>
      sim.dataset.campaigns.flatMap((c) => c.jobs).find((job) => job.drift === change)!;
    const rowsOf = (table: string, jobId: number) =>
      (drifted.output[table] ?? [])
        .map((r) => JSON.parse(r) as Record<string, unknown>)
        .filter((r) => Number(r.job_id) === jobId);
    const rescuedOf = (row: Record<string, unknown> | undefined) =>
      row?._rescued == null ? null : JSON.parse(row._rescued as string);

    beforeAll(async () => {
      sim = await simulator({ ...CALM, driftedReportJobs: DRIFT_CHANGES.length });
      const { topo, containers } = await topology('drift', sim);
      const run = await topo.run(containers);
      if (!run.manifest) throw new Error('the drift run wrote no manifest');
      const event = events
        .commandCalls(PutEventsCommand)
        .map((c) => JSON.parse(c.args[0].input.Entries?.[0]?.Detail ?? '{}') as Record<string, unknown>)
        .find((detail) => detail.run_id === run.runId);
      drifted = {
        manifest: run.manifest,
        output: await snapshotOutput(topo.storage(), db),
        event: event ?? {},
      };
      // The same API, a stack deployed with schemaContract freeze.
      const again = await simulator({ ...CALM, driftedReportJobs: DRIFT_CHANGES.length });
      const freeze = await topology('drift-freeze', again, {
        settings: stackSettings({ unitSize: 5, schemaContract: 'freeze' }),
        env: { SCHEMA_CONTRACT: 'freeze' },
      });
      const frozenRun = await freeze.topo.run(freeze.containers);
      if (!frozenRun.manifest) throw new Error('the frozen run wrote no manifest');
      frozen = frozenRun.manifest;
    });

    it('lands every report and closes the run succeeded, the drift in its manifest and its event', () => {
      const { manifest, event } = drifted;
      expect(manifest.status).toBe('succeeded');
      expect(manifest.counts.reports_exported).toBe(10);
      expect(manifest.counts.reports_invalid).toBe(0);
      expect(event).toMatchObject({ schema_contract: 'evolve' });
      expect(JSON.stringify(event)).toContain('job.job_status');
      // The stack deployed with freeze quarantines exactly the drifted reports, as before the option.
      expect(frozen.status).toBe('partial');
      expect(frozen.counts.reports_invalid).toBe(DRIFT_CHANGES.length - 1); // a new field alone passes the spec's loose objects
      expect(frozen.schema_drift).toBeUndefined();
    });

    const EXPECTED: Record<DriftChange, { drift: Partial<DriftEntry>[]; check: () => void }> = {
      unlisted_value: {
        drift: [{ path: 'job.job_status', kind: 'unlisted_value', seen: ['3'] }],
        check: () => {
          const [row] = rowsOf('reports', jobOf('unlisted_value').id);
          expect(row).toMatchObject({ job_status: 3, _rescued: null });
        },
      },
      decimal_string: {
        drift: [{ path: 'sections[].max_score', kind: 'type_mismatch', seen: ['string'] }],
        check: () => {
          const row = rowsOf('sections', jobOf('decimal_string').id).find(
            (r) => Number(r.section_index) === 0,
          );
          expect(row).toMatchObject({ max_score: null });
          expect(rescuedOf(row)).toEqual({ max_score: '12.5' });
        },
      },
      null_required: {
        drift: [{ path: 'sections[].section_title', kind: 'type_mismatch', seen: ['null'] }],
        check: () => {
          const row = rowsOf('sections', jobOf('null_required').id).find(
            (r) => Number(r.section_index) === 0,
          );
          expect(row).toMatchObject({ section_title: null, _rescued: null });
        },
      },
      new_variant: {
        drift: [{ path: 'sections[].questions[]', kind: 'new_variant', seen: ['rating'] }],
        check: () => {
          const rows = rowsOf('questions', jobOf('new_variant').id).filter(
            (r) => rescuedOf(r)?.type === 'rating',
          );
          expect(rows).toHaveLength(1);
          expect(rows[0]).toMatchObject({ question: 'How was the visit?' });
          expect(rescuedOf(rows[0])).toEqual({ type: 'rating', stars: 4 });
        },
      },
      new_field: {
        drift: [
          { path: 'scorecard', kind: 'new_field' },
          { path: 'job.location.floor', kind: 'new_field' },
        ],
        check: () => {
          const [row] = rowsOf('reports', jobOf('new_field').id);
          expect(rescuedOf(row)).toEqual({
            scorecard: { grade: 'B', weights: [0.5, 0.5] },
            job: { location: { floor: 2 } },
          });
        },
      },
    };

    it.each(DRIFT_CHANGES)('lands a report with %s: its rows hold what fits, _rescued the rest', (change) => {
      const job = jobOf(change);
      for (const expected of EXPECTED[change].drift) {
        expect(drifted.manifest.schema_drift).toContainEqual(
          expect.objectContaining({ ...expected, count: 1, reports: 1, first_job_id: job.id }),
        );
      }
      expect(rowsOf('reports', job.id)).toHaveLength(1);
      EXPECTED[change].check();
    });
  });
});
