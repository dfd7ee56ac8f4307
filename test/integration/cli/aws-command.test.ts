/**
 * The aws command against a stack made of real parts: the start-run, plan-campaign,
 * export-reports and finish-run handlers on the simulator and the local S3 (fauxqs), the
 * command reading the run's records and manifests from that bucket. What cannot run here is
 * mocked: CloudFormation (the stack's outputs), Lambda (its Invoke hands the payload to the real
 * start-run handler, and its answer or thrown error back as Lambda does), SQS (the messages are
 * captured and handed to the next handler), Secrets Manager and EventBridge.
 */
import { CloudFormationClient, DescribeStacksCommand } from '@aws-sdk/client-cloudformation';
import { EventBridgeClient, PutEventsCommand } from '@aws-sdk/client-eventbridge';
import { InvokeCommand, LambdaClient } from '@aws-sdk/client-lambda';
import { GetSecretValueCommand, SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import { SendMessageBatchCommand, SQSClient } from '@aws-sdk/client-sqs';
import type { SQSBatchResponse, SQSEvent } from 'aws-lambda';
import { mockClient } from 'aws-sdk-client-mock';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { AWS_EXIT, awsCommand } from '../../../functions/cli/aws-command.js';
import type { DriftEntry } from '../../../shared/export/schema-drift.js';
import { type Manifest, ManifestSchema } from '../../../shared/export/state/manifest.js';
import {
  encodeRecord,
  type PlanMessage,
  PlanMessageSchema,
  type Unit,
  UnitSchema,
  type UnitSummary,
} from '../../../shared/export/state/records.js';
import { manifestKey, STATE_KEYS } from '../../../shared/layout.js';
import { Captured } from '../../helpers/cli.js';
import { planRecord, runRecord } from '../../helpers/records.js';
import {
  BUCKET,
  context,
  PREFIX,
  QUEUE_URLS,
  sqsEvent,
  startTestbed,
  type Testbed,
} from '../aws/handlers/testbed.js';

/** A Lambda payload as the SDK hands it back: bytes that can also say their text. */
const lambdaPayload = (value: unknown) => {
  const text = JSON.stringify(value);
  return Object.assign(new TextEncoder().encode(text), { transformToString: () => text });
};

type Handler<E, R> = (event: E, ctx: ReturnType<typeof context>) => Promise<R>;

const FUNCTION_NAME = 'CampaignReportExporter-FunctionsStartRun-abc';
const DT = '2026-11-22';
const JOBS_PER_CAMPAIGN = 7;
const UNIT_SIZE = 3;

describe('aws command', () => {
  const cloudFormation = mockClient(CloudFormationClient);
  const lambda = mockClient(LambdaClient);
  const sqs = mockClient(SQSClient);
  const secrets = mockClient(SecretsManagerClient);
  const events = mockClient(EventBridgeClient);
  let bed: Testbed;
  let startRun: Handler<unknown, unknown>;
  let planCampaign: Handler<SQSEvent, SQSBatchResponse>;
  let exportReports: Handler<SQSEvent, SQSBatchResponse>;
  let finishRun: Handler<unknown, { finished: string[] }>;

  /** The stack's outputs as DescribeStacks gives them (infra/exporter.ts names). */
  const stackHas = (extra: Record<string, string> = {}) =>
    cloudFormation.on(DescribeStacksCommand).resolves({
      Stacks: [
        {
          StackName: 'CampaignReportExporter',
          CreationTime: new Date(),
          StackStatus: 'UPDATE_COMPLETE',
          Outputs: Object.entries({
            DataBucketName: BUCKET,
            DataLocation: `s3://${BUCKET}/${PREFIX}`,
            StartRunFunctionName: FUNCTION_NAME,
            ...extra,
          }).map(([OutputKey, OutputValue]) => ({ OutputKey, OutputValue })),
        },
      ],
    });

  /** Lambda's synchronous invoke: the real handler's answer, or its error as Lambda reports one. */
  const invokeRunsStartRun = () =>
    lambda.on(InvokeCommand).callsFake(async (input: { Payload?: Uint8Array }) => {
      const event = JSON.parse(new TextDecoder().decode(input.Payload));
      try {
        const answer = await startRun(event, context('start-run'));
        return { StatusCode: 200, Payload: lambdaPayload(answer) };
      } catch (error) {
        const { name, message } = error as Error;
        const payload = lambdaPayload({ errorType: name, errorMessage: message, trace: [] });
        return { StatusCode: 200, FunctionError: 'Unhandled', Payload: payload };
      }
    });

  /** The messages sent to a queue since the last reset. */
  const sent = (queueUrl: string) =>
    sqs
      .commandCalls(SendMessageBatchCommand)
      .filter((c) => c.args[0].input.QueueUrl === queueUrl)
      .flatMap((c) => c.args[0].input.Entries ?? [])
      .map((e) => JSON.parse(e.MessageBody ?? ''));
  const planMessages = (runId: string): PlanMessage[] =>
    sent(QUEUE_URLS.plan)
      .map((m) => PlanMessageSchema.parse(m))
      .filter((m) => m.run_id === runId);
  const unitMessages = (runId: string): Unit[] =>
    sent(QUEUE_URLS.report)
      .map((m) => UnitSchema.parse(m))
      .filter((m) => m.run_id === runId);

  const plan = (message: PlanMessage) =>
    planCampaign(sqsEvent([{ body: message }], QUEUE_URLS.plan), context('plan-campaign'));
  const exportUnit = (unit: Unit) => exportReports(sqsEvent([{ body: unit }]), context('export-reports'));

  /** Runs the command; its exit code and what it wrote (stdout a terminal of `columns`, if given). */
  async function aws(...argv: string[]) {
    return awsOn(new Captured(), ...argv);
  }
  async function awsOn(stdout: Captured & { columns?: number }, ...argv: string[]) {
    const stderr = new Captured();
    const code = await awsCommand(
      argv,
      {},
      {
        stdout,
        stderr,
        cloudFormation: new CloudFormationClient({ region: 'us-east-1' }),
        lambda: new LambdaClient({ region: 'us-east-1' }),
      },
    );
    return { code, stdout: stdout.text, stderr: stderr.text };
  }
  const json = async (...argv: string[]) => {
    const result = await aws(...argv, '--json');
    expect(result).toMatchObject({ code: AWS_EXIT.ok, stderr: '' });
    return JSON.parse(result.stdout);
  };

  const readManifest = async (runId: string, dt = DT): Promise<Manifest> => {
    const found = await bed.storage.get(manifestKey(dt, runId));
    return ManifestSchema.parse(JSON.parse(Buffer.from(found?.body ?? []).toString()));
  };

  /** Starts a run through the command; its run id. */
  async function start(...flags: string[]): Promise<string> {
    const { code, stdout, stderr } = await aws('start', ...flags);
    expect(code, stderr).toBe(AWS_EXIT.ok);
    return stdout.trim();
  }

  /** Plans every campaign of a run, exports every unit, and lets finish-run close it. */
  async function runToTheEnd(runId: string): Promise<Manifest> {
    for (const message of planMessages(runId)) await plan(message);
    for (const unit of unitMessages(runId)) await exportUnit(unit);
    expect(await finishRun({}, context('finish-run'))).toEqual({ finished: [runId] });
    return readManifest(runId);
  }

  beforeAll(async () => {
    bed = await startTestbed({
      simulator: { campaigns: 2, jobsPerCampaign: JOBS_PER_CAMPAIGN },
      env: { UNIT_SIZE: String(UNIT_SIZE), RUN_DEADLINE_MINUTES: '60' },
    });
    secrets.on(GetSecretValueCommand).resolves({ SecretString: bed.sim.keys.valid });
    sqs.on(SendMessageBatchCommand).resolves({ Successful: [], Failed: [] });
    events.on(PutEventsCommand).resolves({ FailedEntryCount: 0, Entries: [{ EventId: 'e-1' }] });
    startRun = (await import('../../../functions/aws/start-run.js')).handler as unknown as typeof startRun;
    planCampaign = (await import('../../../functions/aws/plan-campaign.js'))
      .handler as unknown as typeof planCampaign;
    exportReports = (await import('../../../functions/aws/export-reports.js'))
      .handler as unknown as typeof exportReports;
    finishRun = (await import('../../../functions/aws/finish-run.js')).handler as unknown as typeof finishRun;
  });

  afterEach(async () => {
    cloudFormation.reset();
    lambda.reset();
    // Each test starts on an output that no run holds.
    await bed.storage.delete([STATE_KEYS.lock]);
  });

  afterAll(async () => {
    for (const mock of [cloudFormation, lambda, sqs, secrets, events]) mock.restore();
    await bed?.close();
  });

  it('starts a run, follows its progress from its records, and shows its manifest once closed', async () => {
    stackHas();
    invokeRunsStartRun();

    const runId = await start('--full', '--date', DT);

    expect(runId).toMatch(/^\d{8}T\d{6}Z-[0-9a-f]{6}$/);
    // A full run: its estimate first (start-run starts nothing), then the start, which skips it.
    const invokes = lambda.commandCalls(InvokeCommand).map((c) => c.args[0].input);
    expect(invokes).toHaveLength(2);
    for (const invoke of invokes)
      expect(invoke).toMatchObject({ FunctionName: FUNCTION_NAME, InvocationType: 'RequestResponse' });
    expect(
      invokes.map((invoke) => JSON.parse(new TextDecoder().decode(invoke.Payload as Uint8Array))),
    ).toEqual([
      { mode: 'full', date: DT, estimate: 'only' },
      { mode: 'full', date: DT, estimate: 'skip' },
    ]);
    expect(cloudFormation.commandCalls(DescribeStacksCommand)[0]?.args[0].input).toEqual({
      StackName: 'CampaignReportExporter',
    });

    // Started: its campaigns listed, none planned.
    const campaignIds = bed.sim.dataset.campaigns.map((c) => c.id);
    expect(await json('status', runId)).toMatchObject({
      state: 'open',
      run_id: runId,
      dt: DT,
      mode: 'full',
      driver: 'queues',
      phase: 'planning',
      campaigns: { total: campaignIds.length, planned: 0 },
      units: { total: 0, done: 0 },
      counts: { campaigns: campaignIds.length, jobs: 0 },
    });

    // One campaign planned: its jobs listed, cut into units, none fetched yet.
    const [first, second] = planMessages(runId);
    await plan(first as PlanMessage);
    const firstUnits = unitMessages(runId);
    const firstJobs = firstUnits.flatMap((u) => u.jobs).length;
    const planned = await json('status', runId);
    expect(planned).toMatchObject({
      phase: 'planning',
      campaigns: { planned: 1 },
      units: { total: firstUnits.length, done: 0 },
      counts: { jobs: JOBS_PER_CAMPAIGN, reports_exported: 0 },
      waiting: firstJobs,
    });

    // Both planned, one unit exported: its jobs have their outcomes, the others wait.
    await plan(second as PlanMessage);
    const units = unitMessages(runId);
    const [unit, ...rest] = units;
    await exportUnit(unit as Unit);
    const summary = await bed.storage.get(STATE_KEYS.unit(runId, unit?.unit ?? ''));
    const outcomes = Object.values(JSON.parse(Buffer.from(summary?.body ?? []).toString()).jobs).map(
      (r) => (r as { outcome: string }).outcome,
    );
    const exporting = await json('status', runId);
    expect(exporting).toMatchObject({
      phase: 'exporting',
      campaigns: { planned: 2 },
      units: { total: units.length, done: outcomes.includes('pending') ? 0 : 1 },
      counts: {
        jobs: 2 * JOBS_PER_CAMPAIGN,
        reports_exported: outcomes.filter((o) => o === 'exported').length,
        reports_not_ready: outcomes.filter((o) => o === 'not_ready').length,
      },
      waiting: rest.flatMap((u) => u.jobs).length,
    });
    expect(exporting.requests.total).toBeGreaterThan(0);

    // With no run id: the open run, as a table.
    const open = await aws('status');
    expect(open.code).toBe(AWS_EXIT.ok);
    // The labels' width follows the longest shown (`schema drift` for an evolve run).
    expect(open.stdout).toMatch(new RegExp(`run +${runId} \\(full, dt=${DT}, AWS\\)`));
    expect(open.stdout).toMatch(new RegExp(`units +1 of ${units.length} done`));

    // Every unit exported: complete, and its counts are what finish-run writes in the manifest.
    for (const other of rest) await exportUnit(other);
    const complete = await json('status', runId);
    expect(complete).toMatchObject({
      phase: 'complete',
      units: { done: units.length },
      waiting: 0,
      retrying: 0,
    });
    const manifest = await runToTheEnd(runId);
    expect(complete.counts).toEqual(manifest.counts);
    expect(complete.requests).toEqual(manifest.requests);

    // Closed: its manifest.
    expect(await json('status', runId)).toEqual({ state: 'closed', manifest });
    const closed = await aws('status', runId);
    expect(closed.stdout).toMatch(new RegExp(`status +${manifest.status}`));
    expect(closed.stdout).toContain(manifestKey(DT, runId));
    // None open: the last run.
    expect(await json('status')).toEqual({ open: [], lock: null, last_run: manifest });
  });

  it('lists the last runs newest first, with their counts, cut to --limit', async () => {
    stackHas();
    invokeRunsStartRun();
    const older = (await json('runs', '--limit', '1'))[0]?.run_id;
    const newest = await runToTheEnd(await start('--incremental', '--date', DT));
    const previous = await readManifest(older);

    const runs = await json('runs');

    expect(runs.map((r: { run_id: string }) => r.run_id)).toEqual([newest.run_id, previous.run_id]);
    expect(runs[0]).toMatchObject({
      status: newest.status,
      mode: 'incremental',
      dt: DT,
      counts: newest.counts,
      manifest: manifestKey(DT, newest.run_id),
    });
    expect(runs[0].duration_s).toBe(
      Math.round((Date.parse(newest.finished_at) - Date.parse(newest.started_at)) / 1000),
    );
    expect((await json('runs', '--limit', '1')).map((r: { run_id: string }) => r.run_id)).toEqual([
      newest.run_id,
    ]);
    const terminal = Object.assign(new Captured(true), { columns: 60 });
    await awsOn(terminal, 'runs');
    expect(terminal.lines().map((line) => line.length)).toEqual([60, 60, 60]);
    expect(terminal.lines()[1]).toMatch(new RegExp(`^${newest.run_id} +${newest.status} .*…$`));
    const table = (await aws('runs')).stdout.split('\n');
    // The stack's runs are evolve runs (its default): the table ends with their drifted paths.
    expect(table[0]).toMatch(
      /^run +status +mode +dt +jobs +exported +unchanged +not ready +failed +duration +drifted paths$/,
    );
    const c = newest.counts;
    expect(table[1]).toMatch(
      new RegExp(
        `^${newest.run_id} +${newest.status} +incremental +${DT} +${c.jobs} +${c.reports_exported} +${c.reports_unchanged} +${c.reports_not_ready} +${c.reports_failed} +\\S`,
      ),
    );
  });

  it("says how long a full run takes at the stack's rate and deadline before it starts the run", async () => {
    stackHas();
    invokeRunsStartRun();
    const before = { total: bed.sim.stats.total, jobs: bed.sim.stats.byEndpoint.jobs };
    // What happened, in order: each line on stderr, and each run start-run started (a lock taken).
    const timeline: string[] = [];
    const startsRun = lambda.on(InvokeCommand);
    startsRun.callsFake(async (input: { Payload?: Uint8Array }) => {
      const event = JSON.parse(new TextDecoder().decode(input.Payload));
      const answer = await startRun(event, context('start-run'));
      if ((await bed.storage.get(STATE_KEYS.lock)) !== undefined)
        timeline.push(`run started (${event.estimate})`);
      return { StatusCode: 200, Payload: lambdaPayload(answer) };
    });
    const stdout = new Captured();
    const stderr = new (class extends Captured {
      override write(chunk: string): boolean {
        timeline.push(`stderr: ${chunk.split(/[;:]/)[0]}`);
        return super.write(chunk);
      }
    })();

    const code = await awsCommand(
      ['start', '--full', '--date', DT],
      {},
      {
        stdout,
        stderr,
        cloudFormation: new CloudFormationClient({ region: 'us-east-1' }),
        lambda: new LambdaClient({ region: 'us-east-1' }),
      },
    );

    expect(code).toBe(AWS_EXIT.ok);
    const runId = stdout.text.trim();
    expect(timeline).toEqual(['stderr: full run', 'run started (skip)', `stderr: run ${runId} started`]);
    // verify, 1 campaign page, 2 job pages, 14 reports: 18 requests at RATE_CEILING 20 (no budget table here).
    expect(stderr.text.trim().split('\n')).toEqual([
      `full run: ${2 * JOBS_PER_CAMPAIGN} reports in 2 campaigns; at 20 requests/s (rateCeiling 20) about 1 s, ` +
        "longer if the API throttles (429); it fits the run deadline (1 h); to shorten it raise rateCeiling to the API's limit (deploy/<stage>.json)",
      expect.stringMatching(new RegExp(`^run ${runId} started: 2 campaign\\(s\\) to plan`)),
    ]);
    // One count per campaign, by the estimate alone (the start skips it); the estimate's requests
    // (verify, the campaigns' page, the counts) belong to no run, the manifest counts the rest.
    expect(bed.sim.stats.byEndpoint.jobs - before.jobs).toBe(2);
    expect(planMessages(runId)).toHaveLength(2);
    const manifest = await runToTheEnd(runId);
    expect(manifest.requests.total).toBe(bed.sim.stats.total - before.total - (2 + 2));
    // --json gives the estimate as start-run answered it, in the start's answer.
    await bed.storage.delete([STATE_KEYS.lock]);
    const answered = await aws('start', '--full', '--date', DT, '--json');
    expect(JSON.parse(answered.stdout).estimate).toEqual({
      size: { campaigns: 2, counted: 2, reports: 14, range: { low: 14, high: 14 }, requests: 18 },
      rate: 20,
      rate_ceiling: 20,
      deadline_minutes: 60,
    });
    await runToTheEnd(JSON.parse(answered.stdout).run_id);
  });

  it('says no run started, exit 3, when another run holds the output', async () => {
    stackHas();
    invokeRunsStartRun();
    const holder = await start('--date', DT);

    const second = await aws('start', '--full');

    expect(second.code).toBe(AWS_EXIT.notStarted);
    expect(second.stdout).toBe('');
    expect(second.stderr).toMatch(new RegExp(`^error: no run started: .*run ${holder} \\(aws-lambda`));
    expect(second.stderr.trim().split('\n')).toHaveLength(1);
    // The holder is the open run; the lock names it.
    const status = await json('status');
    expect(status.open.map((s: { run_id: string }) => s.run_id)).toEqual([holder]);
    expect(status.lock).toMatchObject({ run_id: holder, owner: 'aws-lambda' });
    await runToTheEnd(holder);
  });

  it('shows a run whose closing was cut short as closing, with the counts its manifest keeps', async () => {
    stackHas();
    invokeRunsStartRun();
    const runId = await start('--date', DT);
    for (const message of planMessages(runId)) await plan(message);
    for (const unit of unitMessages(runId)) await exportUnit(unit);
    // The announcement fails: the closing record stays, the tombstone is not written.
    events.on(PutEventsCommand).rejects(new Error('EventBridge is down'));
    await finishRun({}, context('finish-run')).catch(() => undefined);
    events.on(PutEventsCommand).resolves({ FailedEntryCount: 0, Entries: [{ EventId: 'e-2' }] });

    const closing = await json('status', runId);
    const text = await aws('status', runId);

    expect(closing.state).toBe('closing');
    expect(text.stdout).toMatch(/^closing: publishing its files and writing its manifest/);
    expect(await finishRun({}, context('finish-run'))).toEqual({ finished: [runId] });
    const manifest = await readManifest(runId);
    expect(closing.manifest.counts).toEqual(manifest.counts);
    expect(closing.manifest.run_id).toBe(runId);
    expect(await json('status', runId)).toEqual({ state: 'closed', manifest });
  });

  it("prints start-run's error as one line, exit 1, when the function fails", async () => {
    stackHas();
    lambda.on(InvokeCommand).resolves({
      StatusCode: 200,
      FunctionError: 'Unhandled',
      Payload: lambdaPayload({
        errorType: 'ConfigError',
        errorMessage: 'PLAN_QUEUE_URL is not set',
        trace: ['at x'],
      }),
    });

    const { code, stdout, stderr } = await aws('start');

    expect(code).toBe(AWS_EXIT.failed);
    expect(stdout).toBe('');
    expect(stderr).toBe('error: start-run failed: ConfigError: PLAN_QUEUE_URL is not set\n');
  });

  it('prints a run that failed at start with its reason, exit 1', async () => {
    stackHas();
    lambda.on(InvokeCommand).resolves({
      StatusCode: 200,
      Payload: lambdaPayload({
        run_id: '20261122T031500Z-a1b2c3',
        status: 'failed',
        error: 'API key expired',
      }),
    });

    const { code, stderr } = await aws('start');

    expect(code).toBe(AWS_EXIT.failed);
    expect(stderr).toMatch(/^error: run 20261122T031500Z-a1b2c3 failed at start: API key expired \(/);
  });

  it('prints a run whose campaign listing start-run handed on as started, exit 0', async () => {
    stackHas();
    lambda.on(InvokeCommand).resolves({
      StatusCode: 200,
      Payload: lambdaPayload({ run_id: '20261122T031500Z-a1b2c3', status: 'listing', next_page: 7 }),
    });

    const { code, stdout, stderr } = await aws('start');

    expect(code).toBe(AWS_EXIT.ok);
    expect(stdout).toBe('20261122T031500Z-a1b2c3\n');
    expect(stderr).toBe(
      'run 20261122T031500Z-a1b2c3 started: its campaign listing goes on in plan-campaign from page 7; follow it with: aws status 20261122T031500Z-a1b2c3\n',
    );
  });

  it("refuses a backfill date before the stack's partition projection start, before invoking", async () => {
    stackHas({ ProjectionStartDate: '2025-01-01' });

    const { code, stderr } = await aws('start', '--full', '--date', '2024-12-31');

    expect(code).toBe(AWS_EXIT.usage);
    expect(stderr).toMatch(
      /^error: date 2024-12-31 is before the partition projection's start 2025-01-01, .*; nothing was started\n$/,
    );
    expect(lambda.commandCalls(InvokeCommand)).toEqual([]);
    // From the projection start on, the date goes to start-run.
    lambda
      .on(InvokeCommand)
      .resolves({ StatusCode: 200, Payload: lambdaPayload({ status: 'skipped', reason: 'locked' }) });
    expect((await aws('start', '--full', '--date', '2025-01-01')).code).toBe(AWS_EXIT.notStarted);
    expect(lambda.commandCalls(InvokeCommand)).toHaveLength(1);
  });

  it('says no run started when start-run refuses a backfill (a stack without the ProjectionStartDate output)', async () => {
    stackHas();
    const reason =
      "date 2024-12-31 is before the partition projection's start 2025-01-01, so Athena would not see the run";
    lambda
      .on(InvokeCommand)
      .resolves({ StatusCode: 200, Payload: lambdaPayload({ status: 'refused', reason }) });

    const { code, stdout, stderr } = await aws('start', '--full', '--date', '2024-12-31');

    expect(code).toBe(AWS_EXIT.usage);
    expect(stdout).toBe('');
    expect(stderr).toBe(`error: no run started: ${reason}\n`);
    expect(lambda.commandCalls(InvokeCommand)).toHaveLength(1);
  });

  it("finds another stage's stack by its name, and says so when it is not deployed", async () => {
    cloudFormation.on(DescribeStacksCommand).rejects(
      Object.assign(new Error('Stack with id CampaignReportExporter-staging does not exist'), {
        name: 'ValidationError',
      }),
    );

    const { code, stderr } = await aws('runs', '--stage', 'staging');

    expect(code).toBe(AWS_EXIT.failed);
    expect(cloudFormation.commandCalls(DescribeStacksCommand)[0]?.args[0].input).toEqual({
      StackName: 'CampaignReportExporter-staging',
    });
    expect(stderr).toMatch(
      /^error: no stack CampaignReportExporter-staging in this account and region\. pass --stage/,
    );
  });

  it('names an unknown run id, exit 1', async () => {
    stackHas();

    const { code, stderr } = await aws('status', '20200101T000000Z-000000');

    expect(code).toBe(AWS_EXIT.failed);
    expect(stderr).toMatch(/^error: no run 20200101T000000Z-000000 in s3:\/\/handler-tests\/lake/);
  });

  it('refuses wrong flags with exit 2 before asking AWS', async () => {
    for (const argv of [
      ['start', '--full', '--incremental'],
      ['start', '--date', '2026-02-30'],
      ['runs', '--limit', '0'],
      ['status', 'not-a-run'],
      ['stop'],
      ['start', '--stage', 'Prod'],
    ]) {
      const { code, stderr } = await aws(...argv);
      expect(code, argv.join(' ')).toBe(AWS_EXIT.usage);
      expect(stderr.trim().split('\n'), argv.join(' ')).toHaveLength(1);
    }
    expect(cloudFormation.commandCalls(DescribeStacksCommand)).toEqual([]);
  });

  // Last: its run is the oldest by id, but it adds one to the runs the tests above list.
  it("shows an evolve run's schema drift: in status while open and once closed, and in runs", async () => {
    stackHas();
    const runId = '20261101T030000Z-d00d00';
    const dt = '2026-11-01';
    const drift: Record<string, DriftEntry[]> = {
      'c1-u0': [
        {
          path: 'job.job_status',
          kind: 'unlisted_value',
          count: 2,
          reports: 2,
          first_job_id: 101,
          seen: ['9'],
        },
      ],
      'c2-u0': [
        {
          path: 'job.job_status',
          kind: 'unlisted_value',
          count: 1,
          reports: 1,
          first_job_id: 201,
          seen: ['9'],
        },
        { path: 'job.priority', kind: 'new_field', count: 1, reports: 1, first_job_id: 201 },
      ],
    };
    await bed.storage.put(
      STATE_KEYS.runRecord(runId),
      encodeRecord(
        runRecord({
          run_id: runId,
          dt,
          campaign_ids: [1, 2],
          schema_contract: 'evolve',
          started_at: new Date().toISOString(),
        }),
      ),
    );
    for (const campaign of [1, 2]) {
      const name = `c${campaign}-u0`;
      const jobs = [campaign * 100 + 1, campaign * 100 + 2];
      await bed.storage.put(
        STATE_KEYS.plan(runId, campaign),
        encodeRecord(
          planRecord({
            campaign_id: campaign,
            jobs: 2,
            units: [name],
            fetch: jobs.map((j) => ({ job_id: j, fp: `fp${j}` })),
          }),
        ),
      );
      if (campaign === 2) break; // c2-u0 not delivered yet: the run is open
      await putUnit(runId, name, campaign, jobs, drift[name]!);
    }

    // Open: the drift of the units done so far.
    const open = await json('status', runId);
    expect(open).toMatchObject({ state: 'open', phase: 'exporting' });
    expect(open.schema_drift).toEqual(drift['c1-u0']);
    expect((await aws('status', runId)).stdout).toMatch(
      /schema drift +unlisted_value 1 path: job\.job_status \(2 reports\)/,
    );

    await putUnit(runId, 'c2-u0', 2, [201, 202], drift['c2-u0']!);
    await finishRun({}, context('finish-run'));
    const manifest = await readManifest(runId, dt);
    expect(manifest).toMatchObject({ status: 'succeeded', schema_contract: 'evolve' });
    expect(manifest.schema_drift?.map((e) => [e.kind, e.path, e.reports])).toEqual([
      ['new_field', 'job.priority', 1],
      ['unlisted_value', 'job.job_status', 3],
    ]);

    // Closed: the manifest's drift, a line per kind.
    const closed = (await aws('status', runId)).stdout.split('\n');
    const first = closed.findIndex((l) => /^ +schema drift /.test(l));
    expect(closed[first]).toMatch(/schema drift +new_field 1 path: job\.priority \(1 report\)$/);
    expect(closed[first + 1]).toMatch(/^ +unlisted_value 1 path: job\.job_status \(3 reports\)$/);

    // A freeze run beside it (its manifest has neither key, as before the option).
    const frozenId = `${runId.slice(0, -6)}f00000`;
    const { schema_contract: _contract, schema_drift: _drift, ...frozen } = manifest;
    await bed.storage.put(manifestKey(dt, frozenId), `${JSON.stringify({ ...frozen, run_id: frozenId })}\n`);

    const runs = await json('runs');
    const listed = runs.find((r: { run_id: string }) => r.run_id === runId);
    expect(listed).toMatchObject({ schema_contract: 'evolve', schema_drift: manifest.schema_drift });
    const table = (await aws('runs')).stdout.split('\n');
    expect(table[0]).toMatch(/ +duration +drifted paths$/);
    expect(table.find((l) => l.startsWith(runId))).toMatch(/ +2$/);
    // A freeze run's cell is blank.
    const freeze = runs.find((r: { schema_contract?: string }) => r.schema_contract === undefined);
    expect(table.find((l) => l.startsWith(freeze.run_id))).not.toMatch(/ \d+ +\d+$/);
  });

  /** A unit's summary as export-reports leaves it: its jobs exported, with the drift given. */
  async function putUnit(runId: string, name: string, campaign: number, jobs: number[], drift: DriftEntry[]) {
    const summary: UnitSummary = {
      unit: name,
      campaign_id: campaign,
      attempt: 1,
      jobs: Object.fromEntries(jobs.map((j) => [j, { fp: `fp${j}`, outcome: 'exported' as const }])),
      staged: [],
      requests: { total: 2, retried: 0, by_status: { '200': 2 } },
      drift,
    };
    await bed.storage.put(STATE_KEYS.unit(runId, name), encodeRecord(summary));
  }
});
