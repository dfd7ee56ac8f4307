import { GetSecretValueCommand, SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import { SendMessageBatchCommand, SQSClient } from '@aws-sdk/client-sqs';
import { mockClient } from 'aws-sdk-client-mock';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { PlanMessageSchema, RunRecordSchema } from '../../../../shared/export/state/records.js';
import { STATE_KEYS } from '../../../../shared/layout.js';
import { context, keysUnder, QUEUE_URLS, sentBodies, startTestbed, type Testbed } from './testbed.js';

type StartRun = (event: unknown, ctx: ReturnType<typeof context>) => Promise<Record<string, unknown>>;

const CAMPAIGNS = 23;
const PROJECTION_START = '2025-01-01';

describe('start-run', () => {
  const secrets = mockClient(SecretsManagerClient);
  const sqs = mockClient(SQSClient);
  let bed: Testbed;
  let startRun: StartRun;

  const planMessages = () => sentBodies(sqs).map((body) => PlanMessageSchema.parse(body));

  beforeAll(async () => {
    bed = await startTestbed({
      simulator: { campaigns: CAMPAIGNS, jobsPerCampaign: 1 },
      // As the stack sets it (context projectionStartDate).
      env: { PROJECTION_START_DATE: PROJECTION_START },
    });
    // The key as the secret's plain text (the other form, JSON, is in secret.test.ts).
    secrets.on(GetSecretValueCommand).resolves({ SecretString: bed.sim.keys.valid });
    startRun = (await import('../../../../functions/aws/start-run.js')).handler as unknown as StartRun;
  });

  afterEach(async () => {
    sqs.reset();
    bed.sim.resetStats();
    // Each test starts on an output that no run holds (a started run keeps the lock until finish-run).
    await bed.storage.delete([STATE_KEYS.lock]);
  });

  afterAll(async () => {
    secrets.restore();
    sqs.restore();
    await bed?.close();
  });

  it('verifies a plain-text key and sends one plan message per campaign, ten per batch', async () => {
    sqs.on(SendMessageBatchCommand).resolves({ Successful: [], Failed: [] });

    const result = await startRun({ mode: 'full', date: '2026-11-22' }, context('start-run'));

    expect(result).toMatchObject({ status: 'started', campaigns: CAMPAIGNS });
    const batches = sqs.commandCalls(SendMessageBatchCommand).map((c) => c.args[0].input);
    expect(batches.map((b) => b.Entries?.length)).toEqual([10, 10, 3]);
    expect(batches.every((b) => b.QueueUrl === QUEUE_URLS.plan)).toBe(true);
    const messages = planMessages();
    expect(messages.map((m) => m.campaign_id).sort((a, b) => a - b)).toEqual(
      bed.sim.dataset.campaigns.map((c) => c.id).sort((a, b) => a - b),
    );
    expect(new Set(messages.map((m) => JSON.stringify({ run: m.run_id, dt: m.dt, mode: m.mode })))).toEqual(
      new Set([JSON.stringify({ run: result.run_id, dt: '2026-11-22', mode: 'full' })]),
    );
    // SCHEMA_CONTRACT unset: evolve, in the run record and in every plan message that carries the run on.
    const record = await bed.storage.get(STATE_KEYS.runRecord(String(result.run_id)));
    expect(RunRecordSchema.parse(JSON.parse(new TextDecoder().decode(record!.body))).schema_contract).toBe(
      'evolve',
    );
    expect(messages.every((m) => m.schema_contract === 'evolve')).toBe(true);
    // Staged, not yet visible: finish-run publishes the run's files when it closes it.
    expect(
      await keysUnder(bed.storage, STATE_KEYS.staged(String(result.run_id), 'steps/campaigns/')),
    ).toHaveLength(1);
    expect(await keysUnder(bed.storage, 'parquet/')).toEqual([]);
  });

  it('starts nothing, before any API request, while another run holds the output', async () => {
    sqs.on(SendMessageBatchCommand).resolves({ Successful: [], Failed: [] });
    const first = await startRun({ mode: 'full' }, context('start-run'));

    const second = await startRun({ mode: 'full' }, context('start-run'));

    expect(second).toMatchObject({ status: 'skipped' });
    expect(String(second.reason)).toContain(`run ${String(first.run_id)} (aws-lambda`);
    // Of the first run only: verify, one page of campaigns, and its estimate's count of each campaign's jobs.
    expect(bed.sim.stats.total).toBe(2 + Number(first.campaigns));
    expect(bed.sim.stats.byEndpoint.jobs).toBe(Number(first.campaigns));
    expect(planMessages().every((m) => m.run_id === first.run_id)).toBe(true);
  });

  it("answers a full run's estimate and keeps its requests for the manifest; an incremental run counts nothing", async () => {
    sqs.on(SendMessageBatchCommand).resolves({ Successful: [], Failed: [] });
    const jobs = bed.sim.dataset.campaigns.reduce((n, c) => n + c.jobs.length, 0);

    const full = await startRun({ mode: 'full' }, context('start-run'));

    expect(full.estimate).toEqual({
      size: {
        campaigns: CAMPAIGNS,
        counted: CAMPAIGNS,
        reports: jobs,
        range: { low: jobs, high: jobs },
        requests: 2 + CAMPAIGNS + jobs, // every campaign's jobs fit one page
      },
      rate: 20, // RATE_CEILING by default, no budget table in the testbed
      rate_ceiling: 20,
      deadline_minutes: 360,
    });
    const kept = await keysUnder(bed.storage, STATE_KEYS.runsPrefix);
    const requestRecords = kept.filter((key) => key.includes(`/${String(full.run_id)}/requests/`));
    expect(requestRecords).toHaveLength(1);
    const record = JSON.parse(Buffer.from((await bed.storage.get(requestRecords[0]!))!.body).toString());
    expect(record).toMatchObject({ total: CAMPAIGNS, by_status: { '200': CAMPAIGNS } });

    await bed.storage.delete([STATE_KEYS.lock]);
    bed.sim.resetStats();
    const incremental = await startRun({ mode: 'incremental' }, context('start-run'));
    expect(incremental).not.toHaveProperty('estimate');
    expect(bed.sim.stats.byEndpoint.jobs).toBe(0);
  });

  it("answers a full run's estimate alone and starts nothing when asked for it only; the start after it skips it", async () => {
    sqs.on(SendMessageBatchCommand).resolves({ Successful: [], Failed: [] });
    const jobs = bed.sim.dataset.campaigns.reduce((n, c) => n + c.jobs.length, 0);
    const before = await keysUnder(bed.storage, '');

    const estimated = await startRun({ mode: 'full', estimate: 'only' }, context('start-run'));

    expect(estimated).toMatchObject({
      status: 'estimated',
      estimate: { size: { campaigns: CAMPAIGNS, counted: CAMPAIGNS, reports: jobs }, rate: 20 },
    });
    // No lock, no run, no message: nothing started.
    expect(await keysUnder(bed.storage, '')).toEqual(before);
    expect(planMessages()).toEqual([]);
    expect(bed.sim.stats.byEndpoint.jobs).toBe(CAMPAIGNS);

    bed.sim.resetStats();
    const started = await startRun({ mode: 'full', estimate: 'skip' }, context('start-run'));

    expect(started).toMatchObject({ status: 'started', campaigns: CAMPAIGNS });
    expect(started).not.toHaveProperty('estimate');
    expect(bed.sim.stats.byEndpoint.jobs).toBe(0);
    expect(planMessages()).toHaveLength(CAMPAIGNS);
  });

  it('asks no job total past the point that keeps the invocation within half its timeout', async () => {
    // A request may take 65 s at worst and the plan messages 10 s after it: an invocation of
    // 150 s must start none; one of 300 s has 75 s for them, time enough for every count here.
    const short = { ...context('start-run'), getRemainingTimeInMillis: () => 150_000 };
    const whole = { ...context('start-run'), getRemainingTimeInMillis: () => 300_000 };

    const none = await startRun({ mode: 'full', estimate: 'only' }, short);
    const all = await startRun({ mode: 'full', estimate: 'only' }, whole);

    expect(none).toMatchObject({ status: 'estimated', estimate: { size: { counted: 0 } } });
    expect(all).toMatchObject({ status: 'estimated', estimate: { size: { counted: CAMPAIGNS } } });
    expect(bed.sim.stats.byEndpoint.jobs).toBe(CAMPAIGNS);
  });

  it('starts a full run without an estimate when its counts fail', async () => {
    sqs.on(SendMessageBatchCommand).resolves({ Successful: [], Failed: [] });
    bed.sim.failNext(/\/jobs\?page=1&per_page=10$/, '422');

    const result = await startRun({ mode: 'full' }, context('start-run'));

    expect(result).toMatchObject({ status: 'started', campaigns: CAMPAIGNS });
    expect(result).not.toHaveProperty('estimate');
    expect(planMessages()).toHaveLength(CAMPAIGNS);
  });

  it('starts an incremental run dated today on an empty event', async () => {
    sqs.on(SendMessageBatchCommand).resolves({ Successful: [], Failed: [] });

    const before = new Date().toISOString().slice(0, 10);
    await startRun({}, context('start-run'));
    const after = new Date().toISOString().slice(0, 10);

    const [first] = planMessages();
    expect(first?.mode).toBe('incremental');
    expect([before, after]).toContain(first?.dt);
  });

  it('starts one run per scheduled time, however often Scheduler delivers it', async () => {
    sqs.on(SendMessageBatchCommand).resolves({ Successful: [], Failed: [] });
    const at = '2026-11-23T02:00:00Z';
    const first = await startRun({ mode: 'incremental', scheduled_time: at }, context('start-run'));
    await bed.storage.delete([STATE_KEYS.lock]); // as if the run had finished meanwhile
    const requests = bed.sim.stats.total;

    const again = await startRun({ mode: 'incremental', scheduled_time: at }, context('start-run'));

    expect(first).toMatchObject({ status: 'started' });
    expect(again).toMatchObject({ status: 'duplicate', scheduled_time: at, claimed_at: expect.any(String) });
    expect(bed.sim.stats.total).toBe(requests);
    expect(new Set(planMessages().map((m) => m.run_id))).toEqual(new Set([first.run_id]));
    // Another mode, or another time, is another start.
    await expect(startRun({ mode: 'full', scheduled_time: at }, context('start-run'))).resolves.toMatchObject(
      {
        status: 'started',
      },
    );
  });

  it('gives a scheduled time back when it started no run, so that a later delivery starts it', async () => {
    sqs.on(SendMessageBatchCommand).resolves({ Successful: [], Failed: [] });
    const at = '2026-11-23T03:00:00Z';
    const byHand = await startRun({ mode: 'full' }, context('start-run'));

    const locked = await startRun({ mode: 'full', scheduled_time: at }, context('start-run'));
    await bed.storage.delete([STATE_KEYS.lock]);
    const later = await startRun({ mode: 'full', scheduled_time: at }, context('start-run'));

    expect(byHand).toMatchObject({ status: 'started' });
    expect(locked).toMatchObject({ status: 'skipped' });
    expect(later).toMatchObject({ status: 'started' });
  });

  it.each([
    ['an unknown mode', { mode: 'sometimes' }, /mode/],
    ['a date not in YYYY-MM-DD', { date: '22/11/2026' }, /date/],
    ['a date of the wrong type', { date: 20261122 }, /date/],
  ])('rejects %s before it calls the API or sends anything', async (_what, event, field) => {
    const before = await keysUnder(bed.storage, '');

    await expect(startRun(event, context('start-run'))).rejects.toThrow(field);

    expect(bed.sim.stats.total).toBe(0);
    expect(sqs.commandCalls(SendMessageBatchCommand)).toHaveLength(0);
    expect(await keysUnder(bed.storage, '')).toEqual(before);
  });

  it('fails the invocation when SQS refuses a plan message, so the schedule retries it', async () => {
    sqs.on(SendMessageBatchCommand).resolves({
      Successful: [],
      Failed: [{ Id: '0', Code: 'InternalError', SenderFault: false }],
    });

    await expect(startRun({ mode: 'incremental' }, context('start-run'))).rejects.toThrow(/SQS refused/);

    // The lock is let go, so that the schedule's retry can start a run (which closes this one).
    sqs.on(SendMessageBatchCommand).resolves({ Successful: [], Failed: [] });
    await expect(startRun({ mode: 'incremental' }, context('start-run'))).resolves.toMatchObject({
      status: 'started',
    });
  });

  it('refuses a backfill dated before the partition projection, naming the fix, before any lock or request', async () => {
    const before = await keysUnder(bed.storage, '');
    const secretReads = secrets.commandCalls(GetSecretValueCommand).length;

    const result = await startRun({ mode: 'full', date: '2024-12-31' }, context('start-run'));

    expect(result).toEqual({
      status: 'refused',
      reason:
        "date 2024-12-31 is before the partition projection's start 2025-01-01, so Athena would not see the run: " +
        'redeploy with projectionStartDate 2024-12-31 or earlier (deploy/<stage>.json), then start it again',
    });
    expect(bed.sim.stats.total).toBe(0);
    expect(secrets.commandCalls(GetSecretValueCommand)).toHaveLength(secretReads);
    expect(sqs.commandCalls(SendMessageBatchCommand)).toHaveLength(0);
    expect(await keysUnder(bed.storage, '')).toEqual(before);
  });

  it('starts a backfill dated on the projection start', async () => {
    sqs.on(SendMessageBatchCommand).resolves({ Successful: [], Failed: [] });

    const result = await startRun({ mode: 'full', date: PROJECTION_START }, context('start-run'));

    expect(result).toMatchObject({ status: 'started', campaigns: CAMPAIGNS });
    expect(new Set(planMessages().map((m) => m.dt))).toEqual(new Set([PROJECTION_START]));
  });
});
