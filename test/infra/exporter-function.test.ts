/**
 * The functions' log levels, and the bindings ExporterFunctions makes from its optional props
 * (request budget, service name, stage): each variable comes with its grant, and the reverse.
 * Bundling is skipped (functions.test.ts checks the code).
 */
import { App, Stack } from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import * as dynamodb from 'aws-cdk-lib/aws-dynamodb';
import * as sqs from 'aws-cdk-lib/aws-sqs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EXAMPLE_API_BASE_URL, parseConfig } from '../../infra/config.js';
import { ApiKeySecret } from '../../infra/constructs/api-key-secret.js';
import { DataLake } from '../../infra/constructs/data-lake.js';
import { DATA_LAKE_ACCESS } from '../../infra/constructs/data-lake-access.js';
import { ExporterFunction } from '../../infra/constructs/exporter-function.js';
import {
  API_FUNCTIONS,
  ExporterFunctions,
  entryOf,
  FUNCTION_NAMES,
  FUNCTION_SETTINGS,
  type FunctionName,
} from '../../infra/constructs/functions.js';
import { ExporterQueues } from '../../infra/constructs/queues.js';
import {
  actionsOf,
  allowStatements,
  cdkJsonContext,
  functionIds,
  referencedIds,
  removeSynthOutputs,
  resourcesOf,
  synthExporter,
} from './helpers.js';

afterAll(removeSynthOutputs);

type Fn = { Properties: Record<string, unknown> };
const envOf = (fn: Fn) => (fn.Properties.Environment as { Variables: Record<string, unknown> }).Variables;

describe('log levels', () => {
  for (const level of ['WARN', 'ERROR'] as const) {
    it(`keeps Lambda's levels at INFO when logLevel is ${level}, so EMF metric lines survive`, () => {
      const { template } = synthExporter({ logLevel: level });
      const ids = functionIds(template);
      for (const name of FUNCTION_NAMES) {
        const fn = resourcesOf(template, 'AWS::Lambda::Function')[ids[name]]!;
        expect(fn.Properties.LoggingConfig, name).toMatchObject({
          LogFormat: 'JSON',
          ApplicationLogLevel: 'INFO',
          SystemLogLevel: 'INFO',
        });
        expect(envOf(fn).POWERTOOLS_LOG_LEVEL, name).toBe(level);
      }
    });
  }

  it('lets DEBUG through Lambda when logLevel is DEBUG', () => {
    const { template } = synthExporter({ logLevel: 'DEBUG' });
    const ids = functionIds(template);
    for (const name of FUNCTION_NAMES) {
      const fn = resourcesOf(template, 'AWS::Lambda::Function')[ids[name]]!;
      expect(fn.Properties.LoggingConfig).toMatchObject({
        ApplicationLogLevel: 'DEBUG',
        SystemLogLevel: 'INFO',
      });
      expect(envOf(fn).POWERTOOLS_LOG_LEVEL).toBe('DEBUG');
    }
  });
});

/** A stack of the functions alone, with the optional props set. */
function functionsStack(props: { requestBudget?: boolean; serviceName?: string; stage?: string }) {
  const app = new App({ context: { ...cdkJsonContext(), 'aws:cdk:bundling-stacks': [] } });
  const stack = new Stack(app, 'Functions');
  const config = parseConfig({ apiBaseUrl: EXAMPLE_API_BASE_URL });
  const table = new dynamodb.Table(stack, 'Budget', {
    partitionKey: { name: 'pk', type: dynamodb.AttributeType.STRING },
  });
  new ExporterFunctions(stack, 'Functions', {
    config,
    dataLake: new DataLake(stack, 'DataLake', {
      dataPrefix: '',
      rawRetentionDays: config.rawRetentionDays,
      athenaResultsRetentionDays: config.athenaResultsRetentionDays,
      quarantineRetentionDays: config.quarantineRetentionDays,
    }),
    apiKey: new ApiKeySecret(stack, 'ApiKey', { secretName: 'exporter/api-key' }),
    queues: new ExporterQueues(stack, 'Queues', {
      maxReceiveCount: config.maxReceiveCount,
      planConsumerTimeout: FUNCTION_SETTINGS['plan-campaign'].timeout,
      reportConsumerTimeout: FUNCTION_SETTINGS['export-reports'].timeout,
    }),
    ...(props.requestBudget
      ? {
          requestBudget: {
            tableName: table.tableName,
            grantUse: (grantee) => table.grant(grantee, 'dynamodb:UpdateItem'),
            grantFetcherSlots: (grantee) => table.grant(grantee, 'dynamodb:DeleteItem'),
          },
        }
      : {}),
    serviceName: props.serviceName,
    stage: props.stage,
  });
  const template = Template.fromStack(stack);
  return { template, tableId: stack.getLogicalId(table.node.defaultChild as dynamodb.CfnTable) };
}

describe('optional bindings', () => {
  let withBudget: ReturnType<typeof functionsStack>;
  let without: ReturnType<typeof functionsStack>;
  beforeAll(() => {
    withBudget = functionsStack({ requestBudget: true, serviceName: 'acme-exporter', stage: 'staging' });
    without = functionsStack({});
  });

  const fnOf = (template: Template, name: FunctionName): Fn =>
    resourcesOf(template, 'AWS::Lambda::Function')[functionIds(template)[name]]!;
  const roleOf = (template: Template, name: FunctionName) =>
    [...referencedIds(fnOf(template, name).Properties.Role)][0]!;

  it('gives the request budget table and its use to the API functions only, together', () => {
    const { template, tableId } = withBudget;
    const users = new Map<string, Set<string>>();
    for (const { roles, statement } of allowStatements(template)) {
      if (!referencedIds(statement.Resource).has(tableId)) continue;
      for (const r of roles) users.set(r, new Set([...(users.get(r) ?? []), ...actionsOf(statement)]));
    }
    // The budget's grant, and export-reports' fetcher slots too (the test's table grants stand in).
    for (const name of API_FUNCTIONS) {
      expect([...(users.get(roleOf(template, name)) ?? [])].sort(), name).toEqual(
        name === 'export-reports' ? ['dynamodb:DeleteItem', 'dynamodb:UpdateItem'] : ['dynamodb:UpdateItem'],
      );
    }
    expect([...users.keys()].sort()).toEqual(API_FUNCTIONS.map((n) => roleOf(template, n)).sort());
    for (const name of API_FUNCTIONS)
      expect(envOf(fnOf(template, name)).REQUEST_BUDGET_TABLE, name).toEqual({ Ref: tableId });
    expect(envOf(fnOf(template, 'finish-run'))).not.toHaveProperty('REQUEST_BUDGET_TABLE');
  });

  it('sets no budget variable and no grant without a budget', () => {
    const { template, tableId } = without;
    for (const name of FUNCTION_NAMES)
      expect(envOf(fnOf(template, name))).not.toHaveProperty('REQUEST_BUDGET_TABLE');
    expect(
      allowStatements(template).filter(({ statement }) => referencedIds(statement.Resource).has(tableId)),
    ).toEqual([]);
  });

  it('names the service and the stage as given, and defaults them', () => {
    for (const name of FUNCTION_NAMES) {
      expect(envOf(fnOf(withBudget.template, name))).toMatchObject({
        POWERTOOLS_SERVICE_NAME: 'acme-exporter',
        STAGE: 'staging',
      });
      expect(envOf(fnOf(without.template, name))).toMatchObject({
        POWERTOOLS_SERVICE_NAME: 'campaign-report-exporter',
        STAGE: 'prod',
      });
    }
  });

  it('grants each function the data lake access of its table, with DATA_BUCKET', () => {
    const { template } = without;
    for (const name of FUNCTION_NAMES) {
      const reads = allowStatements(template).filter(
        ({ roles, statement }) =>
          roles.has(roleOf(template, name)) && actionsOf(statement).join() === 's3:GetObject',
      );
      const resources = reads.flatMap(({ statement }) =>
        Array.isArray(statement.Resource) ? statement.Resource : [statement.Resource],
      );
      expect(resources).toHaveLength(DATA_LAKE_ACCESS[name].read.length);
      expect(envOf(fnOf(template, name)).DATA_BUCKET).toEqual({
        Ref: expect.stringMatching(/^DataLakeBucket/),
      });
    }
  });
});

describe('ExporterFunction', () => {
  it('refuses a variable bound twice to different values', () => {
    const app = new App({ context: { 'aws:cdk:bundling-stacks': [] } });
    const stack = new Stack(app, 'One');
    const fn = new ExporterFunction(stack, 'Fn', {
      name: 'start-run',
      entry: entryOf('start-run'),
      description: 'test',
      timeout: FUNCTION_SETTINGS['start-run'].timeout,
      memorySize: 512,
      oldSpaceShare: 0.85,
      projectRoot: new URL('../../', import.meta.url).pathname,
      logRetentionDays: 14,
      logLevel: 'INFO',
      serviceName: 'svc',
      stage: 'prod',
    });
    fn.bindPlanQueue(new sqs.Queue(stack, 'A'), 'send');
    expect(() => fn.bindPlanQueue(new sqs.Queue(stack, 'B'), 'send')).toThrow(
      /PLAN_QUEUE_URL is bound twice/,
    );
    fn.configure('UNIT_SIZE', 10);
    expect(() => fn.configure('UNIT_SIZE', 10)).not.toThrow();
  });

  it('types the environment by the handlers’ schema (checked by tsc, which type-checks the tests)', () => {
    const misuse = (f: ExporterFunction) => {
      // @ts-expect-error: a misspelt variable is no variable of functions/aws/env.ts
      f.configure('UNIT_SIZ', 1);
      // @ts-expect-error: a variable that names a resource is set only by the bind… method that grants it
      f.configure('DATA_BUCKET', 'bucket');
    };
    expect(misuse).toBeTypeOf('function');
  });
});

describe('the schema contract', () => {
  it('sets SCHEMA_CONTRACT from the context on start-run alone: the run record carries it to every later step', () => {
    for (const [context, expected] of [
      [{}, 'evolve'],
      [{ schemaContract: 'freeze' }, 'freeze'],
    ] as const) {
      const { template } = synthExporter(context);
      const ids = functionIds(template);
      for (const name of FUNCTION_NAMES) {
        const fn = resourcesOf(template, 'AWS::Lambda::Function')[ids[name]]!;
        expect(envOf(fn).SCHEMA_CONTRACT, name).toBe(name === 'start-run' ? expected : undefined);
      }
    }
  });
});
