/**
 * The deployment's request budget in AWS: one DynamoDB item (infra/constructs/request-budget.ts)
 * that every container leases its API requests from, and the container's limiter built on it.
 */
import type { AttributeValue, DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { BudgetLimiter } from '../../shared/api/budget-limiter.js';
import { AdaptiveRateLimiter, type RateLimiter } from '../../shared/api/limiter.js';
import {
  type BudgetPolicy,
  type BudgetState,
  type BudgetStore,
  type BudgetWrite,
  budgetKey,
  fallbackRate,
  leasingCeiling,
  SharedBudget,
} from '../../shared/api/request-budget.js';
import type { WindowFacts } from '../../shared/api/window-facts.js';
import { REQUEST_BUDGET_TABLE_KEY } from '../../shared/aws/request-budget-table.js';
import type { Log } from '../../shared/log.js';
import { dynamoClient, dynamoSdk, lazy } from './dynamo.js';
import type { Env } from './env.js';

const KEY = REQUEST_BUDGET_TABLE_KEY.name;
const FIELDS = [
  'tat',
  'base',
  'grownAt',
  'holdUntil',
  'version',
] as const satisfies readonly (keyof BudgetState)[];

export interface DynamoBudgetStoreOptions {
  tableName: string;
  /** The deployment's stage: the item's key. */
  stage: string;
  /** Made on the first call; the container's shared client (`dynamoClient`) by default. */
  client?: () => Promise<DynamoDBClient>;
}

/** The budget item, read strongly consistent and written with a condition on its version. */
export class DynamoBudgetStore implements BudgetStore {
  private readonly key: Record<string, AttributeValue>;
  private readonly dynamo: () => Promise<DynamoDBClient>;

  constructor(private readonly options: DynamoBudgetStoreOptions) {
    this.key = { [KEY]: { S: budgetKey(options.stage) } };
    this.dynamo = options.client ? lazy(options.client) : dynamoClient;
  }

  async read(): Promise<BudgetState | undefined> {
    const { GetItemCommand } = await dynamoSdk();
    const answer = await (await this.dynamo()).send(
      new GetItemCommand({ TableName: this.options.tableName, Key: this.key, ConsistentRead: true }),
    );
    return answer.Item ? stateOf(answer.Item) : undefined;
  }

  async write(next: BudgetState, expected: number | undefined): Promise<BudgetWrite> {
    const { ConditionalCheckFailedException, PutItemCommand } = await dynamoSdk();
    const item: Record<string, AttributeValue> = { ...this.key };
    for (const field of FIELDS) item[field] = { N: String(next[field]) };
    try {
      await (await this.dynamo()).send(
        new PutItemCommand({
          TableName: this.options.tableName,
          Item: item,
          ...(expected === undefined
            ? { ConditionExpression: 'attribute_not_exists(#key)', ExpressionAttributeNames: { '#key': KEY } }
            : {
                ConditionExpression: '#version = :expected',
                ExpressionAttributeNames: { '#version': 'version' },
                ExpressionAttributeValues: { ':expected': { N: String(expected) } },
              }),
          // DynamoDB returns the item that won: the retry needs no read.
          ReturnValuesOnConditionCheckFailure: 'ALL_OLD',
        }),
      );
      return { ok: true };
    } catch (error) {
      if (!(error instanceof ConditionalCheckFailedException)) throw error;
      return { ok: false, current: error.Item ? stateOf(error.Item) : undefined };
    }
  }
}

/**
 * Requests per second the deployment sends at most, all containers together: what the leasers
 * of the shared budget share (`leasingCeiling`), or RATE_CEILING without a budget table.
 */
export function deploymentRate(env: Env): number {
  if (env.REQUEST_BUDGET_TABLE === undefined) return env.RATE_CEILING;
  return leasingCeiling({ ceiling: env.RATE_CEILING, containers: env.API_CONTAINERS });
}

/**
 * The container's rate limiter: on the deployment's shared budget when REQUEST_BUDGET_TABLE is
 * set (RATE_CEILING req/s for every container together, less the headroom left for containers
 * whose table fails); without it, an adaptive limiter of its own at RATE_CEILING (the ceiling per
 * container, as before the budget). A table that fails is logged once per outage, and meanwhile
 * the container keeps to its fallback share (`fallbackRate`: the headroom shared by the other
 * API_CONTAINERS − 1). An item the budget does not believe is repaired and logged once.
 * `windowFacts`: what the output's state holds of the API's windows, which the limiter (and its
 * fallback) start from (state/api-windows.ts).
 */
export function containerLimiter(env: Env, log: Log, windowFacts?: WindowFacts): RateLimiter {
  const facts = windowFacts && { windowFacts };
  const own = (maxRate: number) =>
    new AdaptiveRateLimiter({ maxRate, concurrency: env.REPORT_CONCURRENCY, ...facts });
  if (env.REQUEST_BUDGET_TABLE === undefined) return own(env.RATE_CEILING);
  const table = env.REQUEST_BUDGET_TABLE;
  const store = new DynamoBudgetStore({ tableName: table, stage: env.STAGE });
  const policy: BudgetPolicy = { ceiling: env.RATE_CEILING, containers: env.API_CONTAINERS };
  const share = fallbackRate(policy);
  return new BudgetLimiter({
    budget: new SharedBudget(store, policy, {
      onRepair: ({ found, repaired, fields, itemNow, wallNow }) =>
        log.warn('request budget item had times no container could have written: repaired', {
          table,
          fields,
          found,
          repaired,
          itemNow,
          wallNow,
        }),
    }),
    fallback: () => own(share),
    concurrency: env.REPORT_CONCURRENCY,
    ...facts,
    onStoreError: (error) =>
      log.warn('request budget table failed: this container keeps to its own share of the ceiling', {
        table,
        share,
        error: error instanceof Error ? `${error.name}: ${error.message}` : String(error),
      }),
  });
}

function stateOf(item: Record<string, AttributeValue>): BudgetState {
  const number = (field: (typeof FIELDS)[number]) => {
    const value = Number(item[field]?.N);
    if (!Number.isFinite(value)) throw new Error(`request budget item: ${field} is not a number`);
    return value;
  };
  return {
    tat: number('tat'),
    base: number('base'),
    grownAt: number('grownAt'),
    holdUntil: number('holdUntil'),
    version: number('version'),
  };
}
