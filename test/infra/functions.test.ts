/**
 * The functions as `npx cdk synth` builds them from cdk.json (the one real synth with esbuild
 * bundling): runtime, bundles, environment, event sources, the secret and every permission.
 */
import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { promisify } from 'node:util';
import { Match } from 'aws-cdk-lib/assertions';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DATA_ROOTS } from '../../infra/constructs/data-lake.js';
import { DATA_LAKE_ACCESS, KEY_PATTERNS } from '../../infra/constructs/data-lake-access.js';
import {
  API_FUNCTIONS,
  FUNCTION_NAMES,
  FUNCTION_SETTINGS,
  type FunctionName,
  SERVICE_NAME,
} from '../../infra/constructs/functions.js';
import { FUNCTION_SIZES } from '../../infra/function-sizes.js';
import { METRICS_NAMESPACE } from '../../shared/metrics.js';
import { RUN_DEFAULTS } from '../../shared/run-defaults.js';
import { bundleAsLambda } from '../bench/scale-bundle.js';
import {
  actionsOf,
  allowStatements,
  type FunctionIds,
  functionIds,
  logicalIdOf,
  referencedIds,
  removeSynthOutputs,
  resourcesOf,
  type Synthesized,
  synthExporter,
  TEST_API_BASE_URL,
} from './helpers.js';

const run = promisify(execFile);

let s: Synthesized;
let bucketId: string;
let fnIds: FunctionIds;

beforeAll(() => {
  s = synthExporter({}, { bundle: true });
  bucketId = logicalIdOf(s.template, 'AWS::S3::Bucket', 'DataLakeBucket');
  fnIds = functionIds(s.template);
});

const fn = (name: FunctionName) => resourcesOf(s.template, 'AWS::Lambda::Function')[fnIds[name]]!;
const envOf = (name: FunctionName) =>
  (fn(name).Properties.Environment as { Variables: Record<string, unknown> }).Variables;
const roleIdOf = (name: FunctionName) => [...referencedIds(fn(name).Properties.Role)][0]!;
/** `state/runs/*` from the object ARN `Fn::Join ['', [<bucket ARN>, '/state/runs/*']]`. */
const keyPatternOf = (resource: unknown): string => {
  const parts = (resource as { 'Fn::Join'?: [string, unknown[]] })['Fn::Join']?.[1] ?? [];
  const last = parts.at(-1);
  if (typeof last !== 'string' || !last.startsWith('/'))
    throw new Error(`not an object ARN: ${JSON.stringify(resource)}`);
  return last.slice(1);
};

afterAll(removeSynthOutputs);

describe('API key secret', () => {
  it('is created without a value, with instructions to put the key', () => {
    const secrets = resourcesOf(s.template, 'AWS::SecretsManager::Secret');
    const [secret] = Object.values(secrets);
    expect(Object.keys(secrets)).toHaveLength(1);
    expect(secret!.Properties).not.toHaveProperty('GenerateSecretString');
    expect(secret!.Properties).not.toHaveProperty('SecretString');
    expect(secret!.Properties.Description).toMatch(/aws secretsmanager put-secret-value --secret-id \S+/);
    expect(secret!.Properties.Name).toBe('CampaignReportExporter/integration-api-key');
  });

  it('outputs the command that puts the key', () => {
    const outputs = s.template.findOutputs('*', {
      Value: { 'Fn::Join': ['', Match.arrayWith([Match.stringLikeRegexp('put-secret-value')])] },
    });
    expect(Object.keys(outputs)).toHaveLength(1);
  });
});

describe('functions', () => {
  it('has the four functions, each Node 24 on ARM64 with its own handler module', () => {
    expect(Object.keys(resourcesOf(s.template, 'AWS::Lambda::Function'))).toHaveLength(4);
    for (const name of FUNCTION_NAMES) {
      expect(fn(name).Properties).toMatchObject({
        Runtime: 'nodejs24.x',
        Architectures: ['arm64'],
        Handler: 'index.handler',
        Timeout: FUNCTION_SETTINGS[name].timeout.toSeconds(),
        MemorySize: FUNCTION_SETTINGS[name].memorySize,
      });
    }
  });

  it('logs JSON to its own log group with a retention', () => {
    const groups = resourcesOf(s.template, 'AWS::Logs::LogGroup');
    for (const name of FUNCTION_NAMES) {
      const logging = fn(name).Properties.LoggingConfig as { LogFormat: string; LogGroup: unknown };
      expect(logging).toMatchObject({
        LogFormat: 'JSON',
        ApplicationLogLevel: 'INFO',
        // START and REPORT lines (memory used, init duration) are INFO.
        SystemLogLevel: 'INFO',
      });
      const groupId = [...referencedIds(logging.LogGroup)][0]!;
      expect(groups[groupId]!.Properties.RetentionInDays).toBe(90);
    }
  });

  it('sets exactly the environment each handler reads', () => {
    // Source maps, and V8's heap from the function's memory (function-sizes.ts).
    const nodeOptionsOf = (name: FunctionName) =>
      `--enable-source-maps --max-old-space-size=${Math.floor(FUNCTION_SIZES[name].memoryMb * FUNCTION_SIZES[name].oldSpaceShare)} --max-semi-space-size=16`;
    expect(nodeOptionsOf('finish-run')).toBe(
      '--enable-source-maps --max-old-space-size=512 --max-semi-space-size=16',
    );
    const common = {
      DATA_BUCKET: { Ref: bucketId },
      DATA_PREFIX: '',
      POWERTOOLS_SERVICE_NAME: SERVICE_NAME,
      POWERTOOLS_METRICS_NAMESPACE: METRICS_NAMESPACE,
      POWERTOOLS_LOG_LEVEL: 'INFO',
      NODE_OPTIONS: expect.stringMatching(
        /^--enable-source-maps --max-old-space-size=\d+ --max-semi-space-size=16$/,
      ),
      MALLOC_MMAP_THRESHOLD_: '131072',
      STAGE: 'prod',
      // The deployment's table format, from the context (default hive).
      TABLE_FORMAT: 'hive',
    };
    const secretId = Object.keys(resourcesOf(s.template, 'AWS::SecretsManager::Secret'))[0]!;
    const api = {
      API_BASE_URL: TEST_API_BASE_URL,
      API_KEY_SECRET_ID: { Ref: secretId },
      SECRET_CACHE_TTL_SECONDS: String(RUN_DEFAULTS.secretCacheTtlSeconds.value),
      REPORT_CONCURRENCY: String(RUN_DEFAULTS.concurrency.value),
      RATE_CEILING: String(RUN_DEFAULTS.lambdaRateCeiling.value),
      MAX_BODY_MIB: String(RUN_DEFAULTS.maxBodyMiB.value),
      REQUEST_BUDGET_TABLE: { Ref: expect.stringMatching(/^RequestBudgetTable/) },
      // reportMaxConcurrency 2 + planMaxConcurrency 2 + start-run.
      API_CONTAINERS: '5',
    };
    const planQueue = { Ref: expect.stringMatching(/^QueuesPlanQueue/) };
    const reportQueue = { Ref: expect.stringMatching(/^QueuesReportQueue/) };
    expect(envOf('start-run')).toEqual({
      ...common,
      NODE_OPTIONS: nodeOptionsOf('start-run'),
      ...api,
      PLAN_QUEUE_URL: planQueue,
      // It announces the interrupted runs it closes.
      EVENT_BUS_NAME: 'default',
      // It refuses a backfill dated before the partition projection (context projectionStartDate).
      PROJECTION_START_DATE: '2025-01-01',
      // Its lock lasts the deadline and a margin; a full run's estimate names the deadline.
      RUN_DEADLINE_MINUTES: String(RUN_DEFAULTS.runDeadlineMinutes.value),
      // The run's schema contract (context schemaContract, default evolve): its record carries it on.
      SCHEMA_CONTRACT: 'evolve',
    });
    expect(envOf('plan-campaign')).toEqual({
      ...common,
      NODE_OPTIONS: nodeOptionsOf('plan-campaign'),
      ...api,
      PLAN_QUEUE_URL: planQueue,
      REPORT_QUEUE_URL: reportQueue,
      UNIT_SIZE: String(RUN_DEFAULTS.unitSize.value),
      MAX_RECEIVE_COUNT: String(RUN_DEFAULTS.maxReceiveCount.value),
    });
    expect(envOf('export-reports')).toEqual({
      ...common,
      NODE_OPTIONS: nodeOptionsOf('export-reports'),
      ...api,
      REPORT_QUEUE_URL: reportQueue,
      MAX_RECEIVE_COUNT: String(RUN_DEFAULTS.maxReceiveCount.value),
      // One invocation of the two fetches at a time at the default 20 req/s.
      REPORT_FETCHERS: '1',
    });
    expect(envOf('finish-run')).toEqual({
      ...common,
      NODE_OPTIONS: nodeOptionsOf('finish-run'),
      EVENT_BUS_NAME: 'default',
      RUN_DEADLINE_MINUTES: String(RUN_DEFAULTS.runDeadlineMinutes.value),
      PLAN_QUEUE_URL: planQueue,
      REPORT_QUEUE_URL: reportQueue,
    });
  });

  it('consumes the plan queue one campaign at a time and the report queue in configured batches', () => {
    s.template.hasResourceProperties('AWS::Lambda::EventSourceMapping', {
      FunctionName: { Ref: fnIds['plan-campaign'] },
      EventSourceArn: { 'Fn::GetAtt': [Match.stringLikeRegexp('^QueuesPlanQueue'), 'Arn'] },
      BatchSize: 1,
      ScalingConfig: { MaximumConcurrency: 2 },
      FunctionResponseTypes: ['ReportBatchItemFailures'],
    });
    s.template.hasResourceProperties('AWS::Lambda::EventSourceMapping', {
      FunctionName: { Ref: fnIds['export-reports'] },
      EventSourceArn: { 'Fn::GetAtt': [Match.stringLikeRegexp('^QueuesReportQueue'), 'Arn'] },
      BatchSize: 2,
      ScalingConfig: { MaximumConcurrency: 2 },
      FunctionResponseTypes: ['ReportBatchItemFailures'],
    });
  });

  it('does not let Lambda retry the scheduled functions on its own', () => {
    for (const name of ['start-run', 'finish-run'] as const) {
      s.template.hasResourceProperties('AWS::Lambda::EventInvokeConfig', {
        FunctionName: { Ref: fnIds[name] },
        MaximumRetryAttempts: 0,
      });
    }
  });

  it('bundles each entry into a minified CommonJS module with a source map', () => {
    for (const name of FUNCTION_NAMES) {
      const assetPath = fn(name).Metadata?.['aws:asset:path'] as string;
      const dir = join(s.outdir, assetPath);
      const code = readFileSync(join(dir, 'index.js'), 'utf8');
      expect(code).not.toMatch(/^import /m);
      expect(existsSync(join(dir, 'index.js.map'))).toBe(true);
      // Minified: a bundle of the SDK and Powertools has few line breaks per byte.
      expect(code.split('\n').length).toBeLessThan(statSync(join(dir, 'index.js')).size / 1000 + 50);
      const map = JSON.parse(readFileSync(join(dir, 'index.js.map'), 'utf8')) as { sources: string[] };
      expect(map.sources.some((src) => src.includes(`functions/aws/${name}.ts`))).toBe(true);
    }
  });

  it('builds the bundle the scale bench builds from the same options, byte for byte', async () => {
    // The scale bench measures finish-run's code bundled by scale-bundle.ts, not by a synth.
    const dir = mkdtempSync(join(tmpdir(), 'cre-bundle-'));
    try {
      const entry = fileURLToPath(new URL('../../functions/aws/finish-run.ts', import.meta.url));
      await bundleAsLambda(entry, join(dir, 'index.js'));
      const synthed = join(s.outdir, fn('finish-run').Metadata?.['aws:asset:path'] as string, 'index.js');
      expect(readFileSync(join(dir, 'index.js')).equals(readFileSync(synthed))).toBe(true);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('each bundle imports on Node 24 with its environment and exports handler', async () => {
    const stand = (v: unknown, key: string): string => {
      if (typeof v === 'string') return v;
      if (key.endsWith('_QUEUE_URL')) return 'https://sqs.eu-west-1.amazonaws.com/123456789012/queue';
      if (key === 'API_KEY_SECRET_ID') return 'arn:aws:secretsmanager:eu-west-1:123456789012:secret:k-AbCdEf';
      return 'placeholder';
    };
    await Promise.all(
      FUNCTION_NAMES.map(async (name) => {
        const env = Object.fromEntries(Object.entries(envOf(name)).map(([k, v]) => [k, stand(v, k)]));
        const file = pathToFileURL(
          join(s.outdir, fn(name).Metadata?.['aws:asset:path'] as string, 'index.js'),
        );
        // Fake credentials and a closed loopback endpoint: an import that sent a request (a
        // secret prefetched at init) would fail, and its rejection, unhandled outside any
        // invocation, would end the process within the pause before it prints.
        const script =
          `const m = await import(${JSON.stringify(file.href)});` +
          'await new Promise((resolve) => setTimeout(resolve, 300));' +
          'console.log(typeof m.handler); process.exit(0);';
        const { stdout } = await run(process.execPath, ['--input-type=module', '-e', script], {
          env: {
            PATH: process.env.PATH,
            AWS_REGION: 'eu-west-1',
            AWS_ACCESS_KEY_ID: 'AKIDTEST',
            AWS_SECRET_ACCESS_KEY: 'test',
            AWS_ENDPOINT_URL: 'http://127.0.0.1:9',
            AWS_EC2_METADATA_DISABLED: 'true',
            ...env,
          },
          timeout: 20_000,
        });
        expect(stdout.trim(), name).toBe('function');
      }),
    );
  });
});

describe('permissions', () => {
  it('lets the API functions, and only them, lease from the request budget table, and export-reports alone take and release fetcher slots', () => {
    const tables = Object.keys(resourcesOf(s.template, 'AWS::DynamoDB::Table'));
    expect(tables).toHaveLength(1);
    const actionsByRole = new Map<string, Set<string>>();
    for (const { roles, statement } of allowStatements(s.template)) {
      if (!referencedIds(statement.Resource).has(tables[0]!)) continue;
      for (const r of roles) {
        const actions = actionsByRole.get(r) ?? new Set<string>();
        for (const a of actionsOf(statement)) actions.add(a);
        actionsByRole.set(r, actions);
      }
    }
    expect([...actionsByRole.keys()].sort()).toEqual(API_FUNCTIONS.map(roleIdOf).sort());
    for (const name of API_FUNCTIONS) {
      const expected =
        name === 'export-reports'
          ? ['dynamodb:DeleteItem', 'dynamodb:GetItem', 'dynamodb:PutItem']
          : ['dynamodb:GetItem', 'dynamodb:PutItem'];
      expect([...(actionsByRole.get(roleIdOf(name)) ?? [])].sort(), name).toEqual(expected);
    }
  });

  it('invariant: no wildcard action on the data bucket, and only layout roots', () => {
    const onBucket = allowStatements(s.template).filter(({ statement }) =>
      referencedIds(statement.Resource).has(bucketId),
    );
    expect(onBucket.length).toBeGreaterThan(0);
    for (const { statement } of onBucket) {
      for (const action of actionsOf(statement)) expect(action).not.toContain('*');
    }
    const objectResources = onBucket
      .flatMap(({ statement }) =>
        Array.isArray(statement.Resource) ? statement.Resource : [statement.Resource],
      )
      .map((r) => JSON.stringify(r))
      .filter((r) => r.includes('Fn::Join'));
    for (const r of objectResources) {
      expect(
        DATA_ROOTS.some((root) => r.includes(`"/${root}/*"`) || r.includes(`"/${root}/`)),
        r,
      ).toBe(true);
    }
  });

  /** The key patterns a function's role may use with `action` on the data bucket. */
  const grantedKeys = (name: FunctionName, action: string): string[] =>
    allowStatements(s.template)
      .filter(
        ({ roles, statement }) =>
          roles.has(roleIdOf(name)) &&
          actionsOf(statement).includes(action) &&
          referencedIds(statement.Resource).has(bucketId),
      )
      .flatMap(({ statement }) =>
        Array.isArray(statement.Resource) ? statement.Resource : [statement.Resource],
      )
      .map(keyPatternOf)
      .sort();

  it('grants each function exactly the reads, writes and deletes of its access table', () => {
    for (const name of FUNCTION_NAMES) {
      const access = DATA_LAKE_ACCESS[name];
      expect(grantedKeys(name, 's3:GetObject'), `${name} reads`).toEqual([...access.read].sort());
      expect(grantedKeys(name, 's3:PutObject'), `${name} writes`).toEqual([...access.write].sort());
      expect(grantedKeys(name, 's3:AbortMultipartUpload'), `${name} aborts`).toEqual(
        [...access.write].sort(),
      );
      expect(grantedKeys(name, 's3:DeleteObject'), `${name} deletes`).toEqual([...access.delete].sort());
    }
  });

  it('lets only the closers publish, write manifests, the incremental state and the lock', () => {
    const closerOnly = [
      KEY_PATTERNS.parquet,
      KEY_PATTERNS.raw,
      KEY_PATTERNS.manifests,
      KEY_PATTERNS.campaignState,
      KEY_PATTERNS.lock,
    ];
    for (const name of ['plan-campaign', 'export-reports'] as const) {
      const writes = grantedKeys(name, 's3:PutObject');
      for (const pattern of closerOnly) expect(writes, name).not.toContain(pattern);
      // Nor anything that would cover those keys (export-reports keeps the API's windows: one key).
      for (const pattern of writes)
        expect(
          pattern.startsWith('state/runs/') ||
            pattern === 'quarantine/*' ||
            pattern === KEY_PATTERNS.apiWindows,
        ).toBe(true);
    }
    for (const name of ['start-run', 'finish-run'] as const) {
      expect(grantedKeys(name, 's3:PutObject')).toEqual(expect.arrayContaining(closerOnly));
    }
    expect(grantedKeys('export-reports', 's3:PutObject')).toEqual(
      [
        'quarantine/*',
        'state/api-windows.json',
        'state/runs/*/requests/*',
        'state/runs/*/staged/*',
        'state/runs/*/units/*',
      ].sort(),
    );
  });

  it('lets every function list the bucket, without a prefix condition', () => {
    for (const name of FUNCTION_NAMES) {
      const list = allowStatements(s.template).filter(
        ({ roles, statement }) => roles.has(roleIdOf(name)) && actionsOf(statement).includes('s3:ListBucket'),
      );
      expect(list.map(({ statement }) => statement.Resource)).toEqual([{ 'Fn::GetAtt': [bucketId, 'Arn'] }]);
      expect(list[0]?.statement.Condition).toBeUndefined();
    }
  });

  it('lets no function delete published data, and only the closers delete run records', () => {
    const deletes = new Map<string, string[]>();
    for (const { roles, statement } of allowStatements(s.template)) {
      if (!actionsOf(statement).includes('s3:DeleteObject')) continue;
      expect(actionsOf(statement)).toEqual(['s3:DeleteObject']);
      const resources = (Array.isArray(statement.Resource) ? statement.Resource : [statement.Resource]).map(
        (r) => JSON.stringify(r),
      );
      for (const role of roles) deletes.set(role, resources);
    }
    // finish-run closes runs, start-run closes the ones interrupted runs left open; start-run
    // also gives back a scheduled time it claimed but started no run for.
    expect([...deletes.keys()].sort()).toEqual([roleIdOf('finish-run'), roleIdOf('start-run')].sort());
    const keys = (fn: 'finish-run' | 'start-run') =>
      deletes.get(roleIdOf(fn))?.map((r) => r.match(/"\/(state\/[^"]*)"/)?.[1]);
    expect(keys('finish-run')).toEqual(['state/runs/*']);
    expect(keys('start-run')).toEqual(['state/scheduled-starts/*/*.json', 'state/runs/*']);
  });

  it('invariant: the secret is readable by the three API functions only', () => {
    const secretId = Object.keys(resourcesOf(s.template, 'AWS::SecretsManager::Secret'))[0]!;
    const readers = new Set<string>();
    for (const { roles, statement } of allowStatements(s.template)) {
      if (referencedIds(statement.Resource).has(secretId)) {
        expect(actionsOf(statement).sort()).toEqual([
          'secretsmanager:DescribeSecret',
          'secretsmanager:GetSecretValue',
        ]);
        for (const r of roles) readers.add(r);
      }
    }
    expect([...readers].sort()).toEqual(API_FUNCTIONS.map(roleIdOf).sort());
    expect(readers.has(roleIdOf('finish-run'))).toBe(false);
  });

  it('sends to a queue only where a function fans out, and PutEvents only from the closers', () => {
    const senders = new Map<string, Set<string>>();
    const putEvents = new Set<string>();
    for (const { roles, statement } of allowStatements(s.template)) {
      if (actionsOf(statement).includes('sqs:SendMessage')) {
        for (const q of referencedIds(statement.Resource))
          senders.set(q, new Set([...(senders.get(q) ?? []), ...roles]));
      }
      if (actionsOf(statement).includes('events:PutEvents')) {
        for (const r of roles) putEvents.add(r);
        expect(JSON.stringify(statement.Resource)).toContain(':event-bus/default');
      }
    }
    const plan = [...senders.keys()].find((q) => q.startsWith('QueuesPlanQueue'))!;
    const report = [...senders.keys()].find((q) => q.startsWith('QueuesReportQueue'))!;
    // No function sends to any other queue (the schedules' dead-letter queue has its own sender).
    const functionRoles = new Set(FUNCTION_NAMES.map(roleIdOf));
    const sentByFunctions = [...senders].filter(([, roles]) => [...roles].some((r) => functionRoles.has(r)));
    expect(sentByFunctions.map(([q]) => q).sort()).toEqual([plan, report].sort());
    // plan-campaign hands a listing too long for one invocation on to a new plan message.
    expect([...senders.get(plan)!].sort()).toEqual([roleIdOf('start-run'), roleIdOf('plan-campaign')].sort());
    // export-reports hands a unit cut short by its time on to a new report message.
    expect([...senders.get(report)!].sort()).toEqual(
      [roleIdOf('plan-campaign'), roleIdOf('export-reports')].sort(),
    );
    // finish-run announces the runs it closes, start-run the interrupted runs it closes.
    expect([...putEvents].sort()).toEqual([roleIdOf('finish-run'), roleIdOf('start-run')].sort());
  });

  it('lets finish-run read both work queues’ attributes', () => {
    const finish = allowStatements(s.template).filter(({ roles }) => roles.has(roleIdOf('finish-run')));
    const queues = finish
      .filter(({ statement }) => actionsOf(statement).join() === 'sqs:GetQueueAttributes')
      .flatMap(({ statement }) => [...referencedIds(statement.Resource)]);
    expect(queues.sort()).toEqual([
      expect.stringMatching(/^QueuesPlanQueue/),
      expect.stringMatching(/^QueuesReportQueue/),
    ]);
  });

  it('writes logs only to the function’s own group (no AWS managed policy)', () => {
    for (const name of FUNCTION_NAMES) {
      const role = resourcesOf(s.template, 'AWS::IAM::Role')[roleIdOf(name)]!;
      expect(role.Properties.ManagedPolicyArns).toBeUndefined();
      const logStatements = allowStatements(s.template).filter(
        ({ roles, statement }) =>
          roles.has(roleIdOf(name)) && actionsOf(statement).some((a) => a.startsWith('logs:')),
      );
      expect(logStatements).toHaveLength(1);
      const logging = fn(name).Properties.LoggingConfig as { LogGroup: unknown };
      expect(referencedIds(logStatements[0]!.statement.Resource)).toEqual(referencedIds(logging.LogGroup));
    }
  });
});
