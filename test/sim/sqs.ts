/**
 * An SQS queue as the handlers meet it: at-least-once delivery (a message may go to two
 * consumers at once), a visibility timeout after which a message not deleted is delivered
 * again, a message handed back with a delay (ChangeMessageVisibility), receive counts, and a
 * dead-letter queue past the maximum receive count. A redrive moves dead letters back.
 * `SimSqs` is the `SQSClient.send` surface functions/aws/queue.ts calls (SendMessageBatch,
 * ChangeMessageVisibility, GetQueueAttributes) over the queues by URL; Lambda's event source
 * mapping (a batch as an SQSEvent, the partial batch response's successes deleted) is
 * `invokeWithBatch` in actors.ts.
 */
import type { Actor, Sim } from './scheduler.js';

export interface Message {
  id: string;
  /** The body as sent, parsed back from its JSON as a consumer would. */
  body: { run_id: string } & Record<string, unknown>;
  visibleAt: number;
  receiveCount: number;
}

/** One delivery of a message to a consumer. */
export interface Delivery {
  message: Message;
  receiveCount: number;
}

/** An operation a consumer's call applied (sent, deleted, handed back), for the checks. */
export interface QueueOp {
  actor: Actor;
  op: 'send' | 'delete' | 'visibility';
  /** The message deleted or handed back (for a send, none). */
  messageId?: string;
}

export class SimQueue {
  readonly messages = new Map<string, Message>();
  readonly ops: QueueOp[] = [];
  readonly dlq: Message[] = [];
  #ids = 0;
  #waiters: Array<() => void> = [];

  constructor(
    private readonly sim: Sim,
    readonly name: string,
    readonly visibilityMs: number,
    readonly maxReceiveCount: number,
    /** Per call: the caller dies before or after it (the storage's crash rate). */
    private readonly crashRate: number,
  ) {}

  #op<T>(actor: Actor, label: string, apply: () => T): Promise<T> {
    return this.sim.call(actor, this.sim.rng.int(5, 40), `${this.name} ${label}`, (control) => {
      const faulty = this.sim.faultsOn && actor.canCrash;
      if (faulty && this.sim.rng.chance(this.crashRate / 2)) {
        control.kill(`before ${this.name} ${label}`);
        return undefined as T;
      }
      const value = apply();
      if (faulty && this.sim.rng.chance(this.crashRate / 2)) control.kill(`after ${this.name} ${label}`);
      return value;
    });
  }

  /**
   * SendMessageBatch, ten bodies per request, as functions/aws/queue.ts `sendAll` sends them,
   * each delivered after `delaySeconds` (a delayed message is in the queue: `inQueue`).
   */
  async sendAll(actor: Actor, bodies: readonly unknown[], delaySeconds = 0): Promise<void> {
    for (let i = 0; i < bodies.length; i += 10) {
      const chunk = bodies.slice(i, i + 10);
      await this.#op(actor, `send ${chunk.length}${delaySeconds ? ` delayed ${delaySeconds}s` : ''}`, () => {
        for (const body of chunk) this.#add(JSON.parse(JSON.stringify(body)), delaySeconds);
        this.ops.push({ actor, op: 'send' });
        this.sim.log(actor, `${this.name}: sent ${chunk.length}`);
      });
    }
  }

  #add(body: Message['body'], delaySeconds: number): void {
    const id = `${this.name}-m${++this.#ids}`;
    this.messages.set(id, { id, body, visibleAt: this.sim.now + delaySeconds * 1000, receiveCount: 0 });
    this.wake();
  }

  /** Wakes the pollers waiting for a message (a send, a redrive, a message handed back, a stop). */
  wake(): void {
    for (const waiter of this.#waiters.splice(0)) waiter();
  }

  /**
   * A poller's long poll: resolves when a message may be visible (at the earliest visibility
   * among the messages, or at the next send when there is none).
   */
  async nextWork(actor: Actor): Promise<void> {
    let next: number | undefined;
    for (const message of this.messages.values()) {
      if (next === undefined || message.visibleAt < next) next = message.visibleAt;
    }
    const woken = new Promise<void>((resolve) => this.#waiters.push(resolve));
    if (next === undefined) return woken;
    if (next <= this.sim.now) return this.sim.sleep(actor, this.sim.rng.int(200, 2_000), 'poll');
    // Pollers look again within a minute, or at once when a message is sent or handed back.
    const wait = Math.min(next - this.sim.now, 60_000);
    return Promise.race([woken, this.sim.sleep(actor, wait + this.sim.rng.int(200, 2_000), 'poll')]);
  }

  /** DeleteMessage: the message is done. */
  delete(actor: Actor, message: Message): Promise<void> {
    return this.#op(actor, `delete ${message.id}`, () => {
      this.messages.delete(message.id);
      this.ops.push({ actor, op: 'delete', messageId: message.id });
    });
  }

  /**
   * ChangeMessageVisibility of the message `messageId` (its receipt handle): delivered again
   * after `seconds`. One deleted meanwhile is left alone (SQS answers an error the handler logs).
   */
  retryLater(actor: Actor, messageId: string, seconds: number): Promise<void> {
    return this.#op(actor, `visibility ${messageId} ${seconds}s`, () => {
      const current = this.messages.get(messageId);
      if (current) current.visibleAt = this.sim.now + seconds * 1000;
      this.ops.push({ actor, op: 'visibility', messageId });
      this.wake();
    });
  }

  /**
   * Receives up to `max` visible messages (the poller's call, applied directly): each becomes
   * invisible for the visibility timeout, or goes to the DLQ past the maximum receive count.
   */
  receive(max: number): Delivery[] {
    const out: Delivery[] = [];
    for (const message of this.messages.values()) {
      if (out.length >= max) break;
      if (message.visibleAt > this.sim.now) continue;
      if (message.receiveCount >= this.maxReceiveCount) {
        this.messages.delete(message.id);
        this.dlq.push(message);
        this.sim.log('sqs', `${this.name}: ${message.id} to the DLQ after ${message.receiveCount} receives`);
        continue;
      }
      message.receiveCount++;
      message.visibleAt = this.sim.now + this.visibilityMs;
      out.push({ message, receiveCount: message.receiveCount });
    }
    return out;
  }

  /** Moves every dead letter back (a redrive), receive counts reset. */
  redrive(): number {
    const moved = this.dlq.splice(0);
    for (const message of moved) {
      message.receiveCount = 0;
      message.visibleAt = this.sim.now;
      this.messages.set(message.id, message);
    }
    this.wake();
    return moved.length;
  }

  /** ApproximateNumberOfMessages + …NotVisible + …Delayed: every message not deleted, DLQ aside. */
  inQueue(): number {
    return this.messages.size;
  }

  /** True while any message of `runId` is queued, in flight or delayed. */
  holdsRun(runId: string): boolean {
    for (const message of this.messages.values()) if (message.body.run_id === runId) return true;
    return false;
  }
}

/** A command as the SDK's clients send it: its class's name and its input. */
interface Command {
  constructor: { name: string };
  input: Record<string, unknown>;
}

/** The queues by URL, behind the `SQSClient.send` surface functions/aws/queue.ts uses. */
export class SimSqs {
  constructor(
    private readonly sim: Sim,
    private readonly queues: readonly SimQueue[],
  ) {}

  /** The URL the handlers' environment names `queue` by (PLAN_QUEUE_URL, REPORT_QUEUE_URL). */
  static urlOf(queue: Pick<SimQueue, 'name'>): string {
    return `https://sqs.sim/000000000000/${queue.name}`;
  }

  /** A client for one actor: what `sendAll`, `retryLater` and `queuesDrained` need of an SQSClient. */
  clientFor(actor: Actor): unknown {
    return { send: (command: Command) => this.#send(actor, command) };
  }

  #queue(url: unknown): SimQueue {
    const queue = this.queues.find((q) => SimSqs.urlOf(q) === url);
    if (!queue) throw new Error(`no simulated queue at ${String(url)}`);
    return queue;
  }

  async #send(actor: Actor, command: Command): Promise<unknown> {
    const input = command.input;
    switch (command.constructor.name) {
      case 'SendMessageBatchCommand': {
        const entries = input.Entries as Array<{ Id: string; MessageBody: string; DelaySeconds?: number }>;
        // sendAll sends at most ten per request, each batch with one delay.
        const delay = entries[0]?.DelaySeconds ?? 0;
        await this.#queue(input.QueueUrl).sendAll(
          actor,
          entries.map((e) => JSON.parse(e.MessageBody) as unknown),
          delay,
        );
        return { Successful: entries.map((e) => ({ Id: e.Id })), Failed: [] };
      }
      case 'ChangeMessageVisibilityCommand':
        await this.#queue(input.QueueUrl).retryLater(
          actor,
          input.ReceiptHandle as string,
          input.VisibilityTimeout as number,
        );
        return {};
      case 'GetQueueAttributesCommand': {
        const queue = this.#queue(input.QueueUrl);
        const inQueue = await this.sim.call(actor, this.sim.rng.int(10, 60), 'GetQueueAttributes', () =>
          queue.inQueue(),
        );
        // Every message not deleted, visible or not, delayed or not (`inQueue`).
        return { Attributes: { ApproximateNumberOfMessages: String(inQueue) } };
      }
      default:
        throw new Error(`the simulated SQS does not answer ${command.constructor.name}`);
    }
  }
}
