/**
 * An in-memory DynamoDB table behind the `DynamoDBClient.send` surface that
 * functions/aws/request-budget.ts (`DynamoBudgetStore`) and functions/aws/fetcher-slots.ts
 * (`DynamoFetcherSlots`) send to: GetItem, PutItem and DeleteItem with the condition
 * expressions those stores write (`attribute_not_exists(#k)`, `#a = :v`, `#a < :v`, joined by
 * `OR`), `ReturnValuesOnConditionCheckFailure: 'ALL_OLD'` included. The real stores, their
 * error mapping and the real `SharedBudget` run over it. Every call is a scheduler operation,
 * and while faults are on it may meet:
 * - a crash of the caller before the call or after it applied (the answer never read);
 * - the answer lost after a write applied, then the SDK's retry: the same request applied again,
 *   and its answer is the caller's (a conditional write meets its own write: the budget's
 *   version check fails, ConditionalCheckFailedException with the caller's own item);
 * - throttling (ProvisionedThroughputExceededException after the SDK's retries) or a 500
 *   (InternalServerError), not applied;
 * - a slow answer (1-5 s), or one slower than a fetcher slot's lease (30-60 s).
 * Errors are the SDK's own classes, so `instanceof ConditionalCheckFailedException` holds.
 */
import {
  type AttributeValue,
  ConditionalCheckFailedException,
  InternalServerError,
  ProvisionedThroughputExceededException,
} from '@aws-sdk/client-dynamodb';
import { dynamoSdk } from '../../functions/aws/dynamo.js';
import { MAX_QUEUE_MS } from '../../shared/api/request-budget.js';
import type { Actor, Sim } from './scheduler.js';

// The stores load the SDK lazily (`dynamoSdk`): loaded here once, before any seed runs, so that
// no actor's first call waits on a real module load the scheduler does not see.
await dynamoSdk();

/** Per call while faults are on (the seed's storage profile sets the crash rate apart). */
export interface DynamoFaults {
  /** The caller dies (half before the call, half after it applied). */
  crash: number;
  /** Per write: the answer is lost after it applied; the SDK sends it again. */
  lost: number;
  /** Throttled after the SDK's retries. */
  throttled: number;
  /** A 500 after the SDK's retries. */
  failed: number;
  /** An answer that takes 1 to 5 s. */
  slow: number;
  /** An answer that takes 30 to 60 s (longer than a fetcher slot's lease). */
  stall: number;
}

/** What the seed's calls met, for the vitest file's checks. */
export interface DynamoCases {
  /** Conditional writes whose answer was lost and whose SDK retry then failed its condition. */
  lostConditional: number;
  /** Calls throttled or failed with a 500. */
  throttled: number;
  failed: number;
  /** Budget writes by a container whose clock is more than a minute off virtual time. */
  skewedWrites: number;
  /**
   * Budget writes that lost to another container's write which booked the schedule more than
   * MAX_QUEUE_MS ahead of its own time (its `tat` that far past its `grownAt`): the loser's
   * next attempt finds the schedule booked too far and waits (`budgetRacesLost`).
   */
  lostToBooked: number;
}

type Item = Record<string, AttributeValue>;

interface Command {
  constructor: { name: string };
  input: Record<string, unknown>;
}

const TABLE_KEY = 'pk';
/** functions/aws/request-budget.ts's key of the budget item starts so. */
const BUDGET_PREFIX = 'request-budget#';

const sdkError = <T extends Error>(error: T, status: number): T => {
  Object.assign(error, { $metadata: { httpStatusCode: status } });
  return error;
};

/** A write of the budget item that applied: when, and the item's times before and after it. */
export interface BudgetItemWrite {
  at: number;
  before: { grownAt: number; tat: number; at: number } | undefined;
  after: { grownAt: number; tat: number };
}

export class SimDynamo {
  readonly items = new Map<string, Item>();
  /** Every write of the budget item that applied, in order (invariant 21's clock jumps). */
  readonly budgetWrites: BudgetItemWrite[] = [];
  #lastBudgetWriteAt = 0;
  /** When each write of `lostToBooked` lost (budget.ts: those in a backlog at the ceiling). */
  readonly budgetRacesLost: number[] = [];
  readonly cases: DynamoCases = {
    lostConditional: 0,
    throttled: 0,
    failed: 0,
    skewedWrites: 0,
    lostToBooked: 0,
  };

  constructor(
    private readonly sim: Sim,
    private readonly faults: DynamoFaults,
  ) {}

  /** The budget item as stored, if any (invariants). */
  item(key: string): Item | undefined {
    return this.items.get(key);
  }

  /** A client for one actor (a container): what the stores need of a DynamoDBClient. */
  clientFor(actor: Actor, clockOffsetMs = actor.offsetMs): unknown {
    return { send: (command: Command) => this.#send(actor, command, clockOffsetMs) };
  }

  #send(actor: Actor, command: Command, clockOffsetMs: number): Promise<unknown> {
    const name = command.constructor.name;
    const input = command.input;
    const key = keyOf(input);
    const faulty = this.sim.faultsOn;
    const rng = this.sim.rng;
    let latency = rng.int(3, 20);
    if (faulty && rng.chance(this.faults.slow)) latency = rng.int(1_000, 5_000);
    else if (faulty && rng.chance(this.faults.stall)) latency = rng.int(30_000, 60_000);
    return this.sim.call(actor, latency, `dynamo ${name} ${key}`, (control) => {
      const write = name !== 'GetItemCommand';
      if (faulty && actor.canCrash && rng.chance(this.faults.crash / 2)) {
        control.kill(`before dynamo ${name} ${key}`);
        return undefined;
      }
      if (faulty && rng.chance(this.faults.throttled)) {
        this.cases.throttled++;
        this.sim.log(actor, `dynamo ${name} ${key} → throttled`);
        throw sdkError(
          new ProvisionedThroughputExceededException({
            message: 'The level of configured provisioned throughput for the table was exceeded.',
            $metadata: { httpStatusCode: 400 },
          }),
          400,
        );
      }
      if (faulty && rng.chance(this.faults.failed)) {
        this.cases.failed++;
        this.sim.log(actor, `dynamo ${name} ${key} → 500`);
        throw sdkError(
          new InternalServerError({ message: 'Internal server error', $metadata: { httpStatusCode: 500 } }),
          500,
        );
      }
      if (write && key.startsWith(BUDGET_PREFIX) && Math.abs(clockOffsetMs) > 60_000) {
        this.cases.skewedWrites++;
      }
      let result: unknown;
      let error: unknown;
      const apply = (retry: string) => {
        try {
          result = this.#apply(name, input);
          error = undefined;
          if (write) this.sim.log(actor, `dynamo ${name} ${key} ok${retry}`);
        } catch (e) {
          error = e;
          result = undefined;
          this.sim.log(actor, `dynamo ${name} ${key} → ${(e as Error).name}${retry}`);
        }
      };
      apply('');
      if (error instanceof ConditionalCheckFailedException && name === 'PutItemCommand') {
        // Another container's write came first (its own would be the SDK's retry, below).
        const winner = this.items.get(key);
        if (
          key.startsWith(BUDGET_PREFIX) &&
          winner &&
          Number(winner.tat?.N) - Number(winner.grownAt?.N) > MAX_QUEUE_MS
        ) {
          this.cases.lostToBooked++;
          this.budgetRacesLost.push(this.sim.now);
        }
      }
      if (faulty && write && error === undefined && rng.chance(this.faults.lost)) {
        // The answer never came back; the SDK sends the same request again, and its answer counts.
        this.sim.log(actor, `dynamo ${name} ${key}: answer lost, SDK retries`);
        apply(' (SDK retry)');
        if ((error as unknown) instanceof ConditionalCheckFailedException) this.cases.lostConditional++;
      }
      if (faulty && actor.canCrash && rng.chance(this.faults.crash / 2)) {
        control.kill(`after dynamo ${name} ${key}`);
        return undefined;
      }
      if (error !== undefined) throw error;
      return result;
    });
  }

  #apply(name: string, input: Record<string, unknown>): unknown {
    const key = keyOf(input);
    const current = this.items.get(key);
    switch (name) {
      case 'GetItemCommand':
        return { Item: current && structuredClone(current) };
      case 'PutItemCommand': {
        this.#check(input, current);
        this.items.set(key, structuredClone(input.Item as Item));
        if (key.startsWith(BUDGET_PREFIX)) {
          const times = (item: Item) => ({ grownAt: Number(item.grownAt?.N), tat: Number(item.tat?.N) });
          this.budgetWrites.push({
            at: this.sim.now,
            before: current && { ...times(current), at: this.#lastBudgetWriteAt },
            after: times(input.Item as Item),
          });
          this.#lastBudgetWriteAt = this.sim.now;
        }
        return {};
      }
      case 'DeleteItemCommand': {
        this.#check(input, current);
        this.items.delete(key);
        return {};
      }
      default:
        throw new Error(`the simulated DynamoDB does not implement ${name}`);
    }
  }

  /** Throws ConditionalCheckFailedException when the input's condition does not hold of `item`. */
  #check(input: Record<string, unknown>, item: Item | undefined): void {
    const expression = input.ConditionExpression as string | undefined;
    if (expression === undefined || holds(expression, input, item)) return;
    throw sdkError(
      new ConditionalCheckFailedException({
        message: 'The conditional request failed',
        $metadata: { httpStatusCode: 400 },
        ...(input.ReturnValuesOnConditionCheckFailure === 'ALL_OLD' && item
          ? { Item: structuredClone(item) }
          : {}),
      }),
      400,
    );
  }
}

function keyOf(input: Record<string, unknown>): string {
  const key = (input.Key ?? input.Item) as Item | undefined;
  const value = key?.[TABLE_KEY];
  if (value === undefined || !('S' in value))
    throw new Error(`the simulated table's key is ${TABLE_KEY} (S)`);
  return value.S!;
}

/**
 * The condition expressions the stores write: terms joined by `OR`, each
 * `attribute_not_exists(#name)`, `#name = :value` or `#name < :value` (numbers compared as numbers).
 */
function holds(expression: string, input: Record<string, unknown>, item: Item | undefined): boolean {
  const names = (input.ExpressionAttributeNames ?? {}) as Record<string, string>;
  const values = (input.ExpressionAttributeValues ?? {}) as Record<string, AttributeValue>;
  const attribute = (ref: string) => item?.[names[ref] ?? ref];
  return expression.split(' OR ').some((term) => {
    const absent = /^attribute_not_exists\((#\w+)\)$/.exec(term.trim());
    if (absent) return attribute(absent[1]!) === undefined;
    const compare = /^(#\w+) (=|<) (:\w+)$/.exec(term.trim());
    if (!compare) throw new Error(`the simulated DynamoDB cannot read the condition ${term}`);
    const found = attribute(compare[1]!);
    const wanted = values[compare[3]!];
    if (found === undefined || wanted === undefined) return false;
    if ('N' in found && 'N' in wanted) {
      const [a, b] = [Number(found.N), Number(wanted.N)];
      return compare[2] === '=' ? a === b : a < b;
    }
    if ('S' in found && 'S' in wanted) {
      return compare[2] === '=' ? found.S === wanted.S : found.S! < wanted.S!;
    }
    return false;
  });
}
