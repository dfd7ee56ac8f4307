/**
 * The fetcher slots in AWS (shared/api/fetcher-slots.ts): an item per slot in the request
 * budget's table, `fetcher#<stage>#<slot>`, holding its holder and `until`.
 */
import type { AttributeValue, DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { systemClock } from '../../shared/api/clock.js';
import {
  type FetcherHold,
  type FetcherSlotStore,
  fetcherKey,
  takeFetcher,
} from '../../shared/api/fetcher-slots.js';
import { REQUEST_BUDGET_TABLE_KEY } from '../../shared/aws/request-budget-table.js';
import type { Log } from '../../shared/log.js';
import { dynamoClient, dynamoSdk, lazy } from './dynamo.js';
import type { Env } from './env.js';

const KEY = REQUEST_BUDGET_TABLE_KEY.name;

export interface DynamoFetcherSlotsOptions {
  tableName: string;
  stage: string;
  /** Made on the first call; the container's shared client (`dynamoClient`) by default. */
  client?: () => Promise<DynamoDBClient>;
}

/**
 * Slots looked at by an eventually consistent GetItem (half a read unit), taken by a conditional
 * PutItem and released by a conditional DeleteItem.
 */
export class DynamoFetcherSlots implements FetcherSlotStore {
  private readonly dynamo: () => Promise<DynamoDBClient>;

  constructor(private readonly options: DynamoFetcherSlotsOptions) {
    this.dynamo = options.client ? lazy(options.client) : dynamoClient;
  }

  async holderOf(slot: number): Promise<{ holder: string; until: number } | undefined> {
    const { GetItemCommand } = await dynamoSdk();
    const { Item } = await (await this.dynamo()).send(
      new GetItemCommand({
        TableName: this.options.tableName,
        Key: this.key(slot),
        ProjectionExpression: '#holder, #until',
        ExpressionAttributeNames: { '#holder': 'holder', '#until': 'until' },
      }),
    );
    const holder = Item?.holder?.S;
    const until = Number(Item?.until?.N);
    return holder === undefined || !Number.isFinite(until) ? undefined : { holder, until };
  }

  async take(slot: number, holder: string, until: number, now: number): Promise<boolean> {
    const { ConditionalCheckFailedException, PutItemCommand } = await dynamoSdk();
    try {
      await (await this.dynamo()).send(
        new PutItemCommand({
          TableName: this.options.tableName,
          Item: { ...this.key(slot), holder: { S: holder }, until: { N: String(until) } },
          ConditionExpression: 'attribute_not_exists(#key) OR #until < :now OR #holder = :holder',
          ExpressionAttributeNames: { '#key': KEY, '#until': 'until', '#holder': 'holder' },
          ExpressionAttributeValues: { ':now': { N: String(now) }, ':holder': { S: holder } },
        }),
      );
      return true;
    } catch (error) {
      if (error instanceof ConditionalCheckFailedException) return false;
      throw error;
    }
  }

  async release(slot: number, holder: string): Promise<void> {
    const { ConditionalCheckFailedException, DeleteItemCommand } = await dynamoSdk();
    try {
      await (await this.dynamo()).send(
        new DeleteItemCommand({
          TableName: this.options.tableName,
          Key: this.key(slot),
          ConditionExpression: '#holder = :holder',
          ExpressionAttributeNames: { '#holder': 'holder' },
          ExpressionAttributeValues: { ':holder': { S: holder } },
        }),
      );
    } catch (error) {
      // Another holder has it (this one's lapsed): it is theirs to delete.
      if (!(error instanceof ConditionalCheckFailedException)) throw error;
    }
  }

  private key(slot: number): Record<string, AttributeValue> {
    return { [KEY]: { S: fetcherKey(this.options.stage, slot) } };
  }
}

let slots: DynamoFetcherSlots | undefined;

/**
 * This invocation's fetcher slot (REPORT_FETCHERS slots in REQUEST_BUDGET_TABLE); undefined when
 * the deployment sets no slots (every invocation fetches). A table that fails is logged and
 * failed open.
 */
export async function takeFetcherSlot(env: Env, holder: string, log: Log): Promise<FetcherHold | undefined> {
  if (env.REPORT_FETCHERS === undefined || env.REQUEST_BUDGET_TABLE === undefined) return undefined;
  slots ??= new DynamoFetcherSlots({ tableName: env.REQUEST_BUDGET_TABLE, stage: env.STAGE });
  return takeFetcher(slots, {
    slots: env.REPORT_FETCHERS,
    holder,
    clock: systemClock,
    onStoreError: (error, during) =>
      log.warn(
        'fetcher slot table failed: this invocation fetches anyway (the request budget bounds the rate)',
        {
          table: env.REQUEST_BUDGET_TABLE,
          during,
          error: error instanceof Error ? `${error.name}: ${error.message}` : String(error),
        },
      ),
  });
}
