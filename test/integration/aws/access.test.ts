/**
 * Least privilege, proven: the real handlers run on the loopback topology (fauxqs S3 and SQS,
 * a scripted API), each function's S3 client records every command it sends, and every key a
 * function read, wrote or deleted must match its access table (infra/constructs/data-lake-access.ts),
 * which is exactly what the stack grants. The runs go through every path that touches the lake:
 * a start that closes an interrupted run and deletes a dead start's leftovers, quarantined list
 * items and reports, a normal run closed by finish-run, a run whose plans were lost, closed
 * by finish-run after two looks at drained queues, and a run whose campaign and job listings
 * were handed on from invocation to invocation.
 */

import { EventBridgeClient, PutEventsCommand } from '@aws-sdk/client-eventbridge';
import type { S3Client } from '@aws-sdk/client-s3';
import { GetSecretValueCommand, SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import { DeleteMessageCommand, ReceiveMessageCommand } from '@aws-sdk/client-sqs';
import { mockClient } from 'aws-sdk-client-mock';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { cliDeps } from '../../../functions/cli/deps.js';
import {
  DATA_LAKE_ACCESS,
  type DataLakeAccess,
  KEY_PATTERNS,
  keyMatches,
} from '../../../infra/constructs/data-lake-access.js';
import { FUNCTION_NAMES, type FunctionName } from '../../../infra/constructs/functions.js';
import { runExport } from '../../../shared/export/run/local-run.js';
import { LockRecordSchema, releaseLockOf } from '../../../shared/export/state/lock.js';
import { STATE_KEYS } from '../../../shared/layout.js';
import { silentLog } from '../../../shared/log.js';
import { Crash, crashingStorage } from '../../helpers/crash-storage.js';
import { tempDir } from '../../helpers/export.js';
import { type LocalAws, startLocalAws } from '../../helpers/fauxqs.js';
import { useIamGuard } from '../../helpers/iam/hooks.js';
import { onePage, SCRIPTED_KEY, scriptedRoute } from '../../helpers/scripted-api.js';
import { reportData } from '../../unit/api/fixtures.js';
import { startServer, type TestServer } from '../api/server.js';
import { asContainer, type Container, type Containers, LoopbackTopology, stackSettings } from './loopback.js';
import { fakeContext } from './poller.js';

const BUCKET = 'access-lake';
const NAME = 'access';
/** The job whose report body is invalid under either schema contract (`data` is no object: quarantined by export-reports). */
const INVALID_REPORT_JOB = 12;

type Operation = keyof DataLakeAccess;
interface Access {
  fn: FunctionName;
  op: Operation | 'list';
  /** Relative to the data prefix. */
  key: string;
}

/** The IAM action each S3 command of the storage adapter needs, as an operation of the table. */
const OPERATION_OF: Readonly<Record<string, Operation | 'list'>> = {
  GetObjectCommand: 'read',
  HeadObjectCommand: 'read',
  PutObjectCommand: 'write',
  CreateMultipartUploadCommand: 'write',
  UploadPartCommand: 'write',
  CompleteMultipartUploadCommand: 'write',
  AbortMultipartUploadCommand: 'write',
  DeleteObjectCommand: 'delete',
  DeleteObjectsCommand: 'delete',
  ListObjectsV2Command: 'list',
};

/**
 * Keys a function's grants allow that these runs do not reach, and why: only a step that fails
 * before its record writes its requests (the client's retries must run out first: 30 s); a
 * listing handed on writes them too (plan-campaign's, exercised).
 */
const NOT_EXERCISED: ReadonlyArray<[FunctionName, Operation, string]> = [
  ['export-reports', 'write', KEY_PATTERNS.requests],
  // Written by the first run that publishes into an output; here start-run's recovery of the
  // interrupted run is that run. A deployment whose first run finish-run closes needs it.
  ['finish-run', 'write', KEY_PATTERNS.tableFormat],
  // Only when a lock's lease looks over (a holder that died, or a clock far off): the storage's
  // clock is read from a write of start-run's own (issue 32); test/integration/export/lock-skew.test.ts.
  ['start-run', 'read', KEY_PATTERNS.lockClock],
  ['start-run', 'write', KEY_PATTERNS.lockClock],
  // Only when the API's answers show a fixed window the limiter learns (the scripted API sends no
  // rate-limit headers); test/integration/aws/handlers/api-windows.test.ts writes it.
  ['export-reports', 'write', KEY_PATTERNS.apiWindows],
];

describe('what each function touches in the data lake', () => {
  const secrets = mockClient(SecretsManagerClient);
  const events = mockClient(EventBridgeClient);
  const accesses: Access[] = [];
  const unknown: string[] = [];
  let aws: LocalAws;
  let api: TestServer;
  let topo: LoopbackTopology;
  let interruptedRunId: string;
  const leftoverRunId = '20260101T000000Z-dead00';
  let listings = 0;
  /** Lists of two pages each (the handed-on run), one page otherwise. */
  let paged = false;
  const twoPages = (items: unknown[], page: number) => ({
    body: {
      data: items.slice((page - 1) * 2, page * 2),
      meta: { current_page: page, per_page: 2, total: items.length, last_page: Math.ceil(items.length / 2) },
    },
  });
  const iam = useIamGuard();
  const scheduledTime = '2026-11-23T02:00:00Z';
  let duplicate: unknown;
  let locked: unknown;
  let handedOn: Awaited<ReturnType<LoopbackTopology['run']>> | undefined;

  /** Records every S3 command a container's client sends, as its function's access. */
  function record(s3: S3Client, fn: FunctionName): void {
    s3.middlewareStack.add(
      (next, context) => async (args) => {
        const input = args.input as {
          Bucket?: string;
          Key?: string;
          Prefix?: string;
          Delete?: { Objects?: { Key?: string }[] };
        };
        const op = OPERATION_OF[context.commandName ?? ''];
        if (op === undefined || input.Bucket !== BUCKET) {
          unknown.push(`${fn}: ${context.commandName} on ${input.Bucket}`);
        } else {
          const keys =
            op === 'list'
              ? [input.Prefix ?? '']
              : input.Delete
                ? (input.Delete.Objects ?? []).map((o) => o.Key ?? '')
                : [input.Key ?? ''];
          for (const key of keys) {
            if (!key.startsWith(topo.prefix)) unknown.push(`${fn}: ${op} ${key} outside the data prefix`);
            else accesses.push({ fn, op, key: key.slice(topo.prefix.length) });
          }
        }
        return next(args);
      },
      { step: 'initialize', name: 'accessRecorder' },
    );
  }

  /** A fresh module registry per container, its client recorded as `fn`'s. */
  async function container(fn: FunctionName): Promise<Container> {
    vi.resetModules();
    const c = asContainer(await import('./container.js'), iam());
    record(c.s3, fn);
    topo.attach(c);
    return c;
  }

  beforeAll(async () => {
    api = await startServer(
      scriptedRoute({
        // An invalid campaign item (start-run quarantines it) and an invalid job item (plan-campaign).
        campaigns: (page) =>
          paged
            ? twoPages([{ id: 1 }, { id: 2 }, { id: 3 }, { id: 4 }, { id: 5 }], page)
            : onePage([{ id: 1 }, { id: 2 }, { id: '41' }]),
        // Job 11's list item changes on every listing, so every run has a state to record (a run
        // that changes no outcome writes no campaign state).
        jobs: (_c, page) =>
          paged
            ? twoPages(
                [
                  { id: 11, job_status: 2, listing: ++listings },
                  { id: 13, job_status: 2 },
                  { id: 14, job_status: 2 },
                ],
                page,
              )
            : onePage([
                { id: 11, job_status: 2, listing: ++listings },
                { id: INVALID_REPORT_JOB, job_status: 2 },
                { id: 'x' },
              ]),
        report: (_c, jobId) =>
          jobId === INVALID_REPORT_JOB
            ? { body: { data: ['not', 'a', 'report'] } }
            : { body: { data: reportData(jobId) } },
      }),
    );
    secrets.on(GetSecretValueCommand).resolves({ SecretString: SCRIPTED_KEY });
    events.on(PutEventsCommand).resolves({ FailedEntryCount: 0, Entries: [{ EventId: 'e-1' }] });
    aws = await startLocalAws();
    topo = await LoopbackTopology.create({
      aws,
      apiBaseUrl: api.url,
      bucket: BUCKET,
      name: NAME,
      settings: stackSettings({ unitSize: 1 }),
      iam: iam(),
    });
    topo.applyEnv();
    const storage = topo.storage();

    // A run interrupted as it started closing (a CLI killed there): records, staged files, no
    // closing record; its lock released as an expired one would be.
    const deps = cliDeps({
      baseUrl: api.url,
      apiKey: SCRIPTED_KEY,
      out: await tempDir('access-unused'),
      concurrency: 4,
      maxRate: 10_000,
      log: silentLog,
    });
    const dies = crashingStorage(storage, (call) => call.op === 'put' && call.key.endsWith('/closing.json'));
    await expect(runExport({ ...deps, storage: dies }, { mode: 'incremental' })).rejects.toBeInstanceOf(
      Crash,
    );
    const lock = LockRecordSchema.parse(
      JSON.parse(Buffer.from((await storage.get(STATE_KEYS.lock))!.body).toString()),
    );
    interruptedRunId = lock.run_id;
    await releaseLockOf(storage, interruptedRunId, new Date());
    // And the leftovers of a start that died before its run record.
    await storage.put(STATE_KEYS.staged(leftoverRunId, 'parquet/campaigns/campaigns.parquet'), 'x');

    // One at a time: concurrent imports after resetModules would share one module instance.
    const containers: Containers = {
      start: await container('start-run'),
      plan: [await container('plan-campaign')],
      report: [await container('export-reports')],
      finish: await container('finish-run'),
    };
    // Full: the interrupted run's jobs are in the state now, and must be fetched again.
    const normal = await topo.run(containers, { mode: 'full' });
    if (normal.manifest?.status !== 'partial') throw new Error(`unexpected run: ${JSON.stringify(normal)}`);

    // A run whose plan messages were lost: finish-run sees drained queues twice, then closes it.
    const started = (await containers.start.startRun(
      { mode: 'full' },
      fakeContext({ functionName: 'start-run', timeoutMs: 300_000 }),
    )) as { run_id: string };
    // A schedule's time that arrives while that run holds the output: start-run gives it back.
    locked = await containers.start.startRun(
      { mode: 'incremental', scheduled_time: '2026-11-22T02:00:00Z' },
      fakeContext({ functionName: 'start-run', timeoutMs: 300_000 }),
    );
    const sqs = aws.sqsClient();
    for (;;) {
      const { Messages = [] } = await sqs.send(
        new ReceiveMessageCommand({ QueueUrl: topo.plan.url, MaxNumberOfMessages: 10 }),
      );
      if (Messages.length === 0) break;
      for (const m of Messages)
        await sqs.send(new DeleteMessageCommand({ QueueUrl: topo.plan.url, ReceiptHandle: m.ReceiptHandle }));
    }
    const finish = () =>
      containers.finish.finishRun({}, fakeContext({ functionName: 'finish-run', timeoutMs: 120_000 }));
    expect(await finish()).toEqual({ finished: [] });
    expect(await finish()).toEqual({ finished: [started.run_id] });

    // A scheduled run, and the schedule's second delivery of the same time.
    const scheduled = await topo.run(containers, { mode: 'incremental', scheduled_time: scheduledTime });
    if (scheduled.manifest === undefined) throw new Error('the scheduled run wrote no manifest');
    duplicate = await containers.start.startRun(
      { mode: 'incremental', scheduled_time: scheduledTime },
      fakeContext({ functionName: 'start-run', timeoutMs: 300_000 }),
    );

    // Listings of two pages, in invocations too short for more than a page each (half their
    // timeout less a page's worst and the wrap-up is nothing): start-run hands the campaign
    // listing on to plan-campaign, which goes on with it, and each job listing hands on once.
    paged = true;
    handedOn = await topo.run(containers, { mode: 'full' }, {}, undefined, {
      startMs: 60_000,
      planMs: 60_000,
    });
    paged = false;
  }, 120_000);

  afterAll(async () => {
    await api?.close();
    await aws?.close();
    secrets.restore();
    events.restore();
  });

  it('went through recovery, quarantine, publishing, the drained close and a duplicate schedule', () => {
    const touched = (fn: FunctionName, op: Access['op'], part: string) =>
      accesses.some((a) => a.fn === fn && a.op === op && a.key.includes(part));
    expect(locked).toMatchObject({ status: 'skipped' });
    expect(touched('start-run', 'delete', 'scheduled-starts/incremental/2026-11-22T02:00:00.000Z.json')).toBe(
      true,
    );
    expect(duplicate).toMatchObject({ status: 'duplicate', scheduled_time: scheduledTime });
    expect(
      touched('start-run', 'read', `scheduled-starts/incremental/${new Date(scheduledTime).toISOString()}`),
    ).toBe(true);
    expect(touched('start-run', 'write', `${interruptedRunId}/closing.json`)).toBe(true);
    expect(touched('start-run', 'delete', leftoverRunId)).toBe(true);
    expect(touched('start-run', 'write', 'parquet/')).toBe(true);
    expect(touched('start-run', 'write', 'quarantine/')).toBe(true);
    expect(touched('plan-campaign', 'write', 'quarantine/')).toBe(true);
    expect(touched('export-reports', 'write', `job-${INVALID_REPORT_JOB}.json`)).toBe(true);
    expect(touched('finish-run', 'write', 'drained.json')).toBe(true);
    expect(handedOn?.started).toMatchObject({ status: 'listing', next_page: 2 });
    expect(handedOn?.manifest).toMatchObject({ status: 'succeeded', counts: { campaigns: 5, jobs: 15 } });
    expect(touched('plan-campaign', 'write', 'campaign-listing/')).toBe(true);
    expect(touched('plan-campaign', 'write', '/run.json')).toBe(true);
    expect(touched('plan-campaign', 'write', '/listing/')).toBe(true);
    expect(unknown).toEqual([]);
  });

  it('made every AWS call under its role in the synthesized stack, mocked services too', () => {
    const guard = iam();
    const bucket = /^arn:aws:s3:::[^/]+\/state\/scheduled-starts\//;
    expect(guard.made('start-run', 's3:PutObject', bucket)).toBe(true);
    expect(guard.made('start-run', 's3:GetObject', bucket)).toBe(true);
    expect(guard.made('start-run', 's3:DeleteObject', bucket)).toBe(true);
    expect(guard.made('start-run', 'secretsmanager:GetSecretValue')).toBe(true);
    expect(guard.made('start-run', 'sqs:SendMessage', /:access-plan$/)).toBe(false); // the stack's queue, not the local one
    expect(guard.made('start-run', 'sqs:SendMessage', /^arn:aws:sqs:eu-west-1:123456789012:/)).toBe(true);
    expect(guard.made('start-run', 'events:PutEvents')).toBe(true); // it closed the interrupted run
    expect(guard.made('plan-campaign', 'sqs:ReceiveMessage')).toBe(true); // the event source mapping
    expect(guard.made('plan-campaign', 'sqs:SendMessage')).toBe(true);
    expect(guard.made('export-reports', 'sqs:DeleteMessage')).toBe(true);
    expect(guard.made('finish-run', 'sqs:GetQueueAttributes')).toBe(true);
    expect(guard.made('finish-run', 'events:PutEvents', /:event-bus\/default$/)).toBe(true);
    expect(guard.calls.filter((c) => !c.allowed)).toEqual([]);
  });

  it('touches no key outside its grants, for every function and operation', () => {
    const outside = accesses
      .filter((a) => a.op !== 'list')
      .filter((a) => !DATA_LAKE_ACCESS[a.fn][a.op as Operation].some((p) => keyMatches(p, a.key)))
      .map((a) => `${a.fn} ${a.op} ${a.key}`);
    expect([...new Set(outside)]).toEqual([]);
  });

  it('needs every key pattern it is granted (no grant wider than the work)', () => {
    const unused: string[] = [];
    for (const fn of FUNCTION_NAMES) {
      for (const op of ['read', 'write', 'delete'] as const) {
        for (const pattern of DATA_LAKE_ACCESS[fn][op]) {
          const used = accesses.some((a) => a.fn === fn && a.op === op && keyMatches(pattern, a.key));
          const excused = NOT_EXERCISED.some(([f, o, p]) => f === fn && o === op && p === pattern);
          if (!used && !excused) unused.push(`${fn} ${op} ${pattern}`);
          if (used && excused)
            unused.push(`${fn} ${op} ${pattern} is exercised now: drop it from NOT_EXERCISED`);
        }
      }
    }
    expect(unused).toEqual([]);
  });

  it('lists only inside the data prefix (s3:ListBucket is bucket-wide on purpose)', () => {
    const lists = accesses.filter((a) => a.op === 'list');
    expect(lists.length).toBeGreaterThan(0);
    // parquet/ and iceberg/: an output's table format, while none is recorded, is the one whose
    // tables hold files (one key is enough; state/table-format.ts). state/campaigns/: a run that
    // switches the format makes the state forget the runs before it (state/incremental.ts).
    const prefixes = [STATE_KEYS.runsPrefix, 'runs/', 'parquet/', 'iceberg/', 'state/campaigns/'];
    for (const { key } of lists) expect(prefixes.some((p) => key.startsWith(p))).toBe(true);
  });
});
