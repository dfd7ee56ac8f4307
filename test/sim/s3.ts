/**
 * An in-memory S3 bucket behind the `S3Client.send` surface that `S3Storage` uses (a streamed
 * upload of at most one part is one PutObject), so that the real adapter and its error mapping run
 * in the simulation. Every call is a scheduler operation, and may meet an injected fault:
 * - crash before it (nothing applied) or after it applied (the answer never read);
 * - the answer lost after a write applied, then the SDK's retry: the request is applied again
 *   and the retry's answer is the caller's (a conditional put meets its own object: 412);
 * - 409 ConditionalRequestConflict on a conditional write (not applied);
 * - 503 SlowDown after the SDK's retries (not applied).
 * Errors carry `name` and `$metadata.httpStatusCode` as the SDK's do.
 */
import { Buffer } from 'node:buffer';
import type { Prng } from './prng.js';
import type { Actor, Sim } from './scheduler.js';

export interface FaultRates {
  /** Per call: the caller dies (half before the call, half after it applied). */
  crash: number;
  /** Per write: the answer is lost after it applied; the SDK sends it again. */
  lost: number;
  /** Per conditional write: 409 ConditionalRequestConflict. */
  conflict: number;
  /** Per call: 503 SlowDown (after the SDK's own retries). */
  slowDown: number;
  /** Per call: an answer that takes 1 to 30 s. */
  slowCalls: number;
  /** Per call: the caller's process pauses 30 s to 2 min first (GC, a suspended VM or laptop). */
  pause: number;
}

interface StoredObject {
  body: Uint8Array;
  etag: string;
  /** When the write applied, on the simulation's clock (the bucket's: no actor's skew). */
  writtenAt: number;
}

/** An Iceberg table's metadata file, created at each commit's swap (the file catalog). */
const METADATA_SWAP = /^iceberg\/[^/]+\/metadata\/v\d+\.metadata\.json$/;
/**
 * The table-format record (`state/table-format.json`): written once per format switch, the step
 * whose crash points (before it, after it) a switch's recovery must get right.
 */
const FORMAT_RECORD = 'state/table-format.json';
/** How much likelier a crash is at a swap (or at the format record) than at any other call. */
const SWAP_CRASH_FACTOR = 10;
/** The lock and a run's tombstone: where a crash leaves a lock only the lock's rules free (liveness.ts, 18). */
const LOCK_OR_TOMBSTONE = /^state\/(?:lock\.json|runs\/[^/]+\/closed\.json)$/;
/** A run's manifest (`manifestKey`): its create-if-absent is the step that makes the run published. */
const MANIFEST = /^runs\/dt=[^/]+\/[^/]+\.json$/;
/** One storage request as applied (or refused), for the trace and the invariants. */
export interface StorageEvent {
  t: number;
  actor: Actor;
  op: 'put' | 'get' | 'list' | 'delete';
  key: string;
  /** `ok`, an error name, or a fault. */
  result: string;
}

/** Told of every read and of every write that changed the bucket. */
export type AccessListener = (
  actor: Actor,
  op: 'put' | 'delete' | 'get',
  key: string,
  body: Uint8Array | undefined,
) => void;

class SdkError extends Error {
  readonly $metadata: { httpStatusCode: number };
  readonly $fault: 'client' | 'server';
  constructor(name: string, status: number, message: string) {
    // No stack: thousands are thrown per seed (every GET of a missing key) and none is printed.
    const limit = Error.stackTraceLimit;
    Error.stackTraceLimit = 0;
    super(message);
    Error.stackTraceLimit = limit;
    this.name = name;
    this.$metadata = { httpStatusCode: status };
    this.$fault = status >= 500 ? 'server' : 'client';
  }
}

const unquote = (etag: string): string => etag.replace(/^"(.*)"$/, '$1');

function bytesOf(body: unknown): Uint8Array {
  if (typeof body === 'string') return new Uint8Array(Buffer.from(body, 'utf8'));
  if (body instanceof Uint8Array) return new Uint8Array(body); // a copy: callers may reuse theirs
  throw new TypeError(`the simulated S3 takes bytes or text, got ${typeof body}`);
}

interface Command {
  constructor: { name: string };
  input: Record<string, unknown>;
}

export class SimS3 {
  readonly objects = new Map<string, StoredObject>();
  readonly events: StorageEvent[] = [];
  readonly listeners: AccessListener[] = [];
  /**
   * Crashes at writes of the lock and of tombstones ten times likelier (scenario.ts draws it):
   * a start dying between its lock and its record, a closer between its tombstone and the
   * release, or before it deleted the run's records.
   */
  crashAtLockAndTombstone = false;
  /** A process pause the scenario places at a call of its choosing (cli-cases.ts): extra latency, no draw. */
  pauseBefore:
    | ((actor: Actor, command: string, key: string, body: Uint8Array | undefined) => number)
    | undefined;
  /** A crash the scenario places right after a call of its choosing applied (closer-cases.ts): no draw. */
  crashAfter: ((actor: Actor, command: string, key: string) => boolean) | undefined;
  /**
   * Per-key outages (scenario.ts draws them in a share of the seeds): a call on a `state/` key
   * starts one with this chance, and every call on that key then answers 503 SlowDown for 5-30 s
   * (a throttled prefix, a hot partition), past one caller's retries (the announcement's done
   * mark tries five times over about 6 s). Drawn from a stream of their own, not the scheduler's:
   * a seed without them keeps every draw.
   */
  outages: { chance: number; rng: Prng } | undefined;
  readonly #outageUntil = new Map<string, number>();
  /**
   * Spells of 409 ConditionalRequestConflict at a run's manifest (scenario.ts draws them in a
   * share of the seeds): a conditional put of a manifest starts one with this chance, and every
   * conditional put of that key answers 409 for 2-6 s, past the adapter's five tries (1.5 s of
   * backoff): the closer's manifest put fails with nothing in place (finish-run must not count
   * it written). Drawn from a stream of their own. `met` counts the puts that met one.
   */
  manifestConflicts: { chance: number; rng: Prng; met: number } | undefined;
  readonly #conflictUntil = new Map<string, number>();
  #etags = 0;

  constructor(
    private readonly sim: Sim,
    private readonly faults: FaultRates,
  ) {}

  /** The body of a key, read directly (invariants, liveness). */
  peek(key: string): Uint8Array | undefined {
    return this.objects.get(key)?.body;
  }

  keys(prefix = ''): string[] {
    return [...this.objects.keys()].filter((k) => k.startsWith(prefix)).sort(compareKeys);
  }

  /** A client for one actor: what `new S3Storage({ client })` and `Upload` need of an S3Client. */
  clientFor(actor: Actor): unknown {
    return {
      config: {
        // What an upload reads of a client's config (lib-storage's single-part path: the Location; checksums).
        requestHandler: undefined,
        forcePathStyle: true,
        endpoint: async () => ({ protocol: 'https:', hostname: 's3.sim', path: '/', port: undefined }),
        requestChecksumCalculation: async () => 'WHEN_REQUIRED',
      },
      send: (command: Command) => this.#send(actor, command),
    };
  }

  #send(actor: Actor, command: Command): Promise<unknown> {
    const name = command.constructor.name;
    const input = command.input;
    const key = String(input.Key ?? input.Prefix ?? '');
    // Now and then a call takes seconds (S3's tail latency, the SDK's own backoff on throttling).
    const slow = this.sim.faultsOn && this.sim.rng.chance(this.faults.slowCalls);
    let latency = slow ? this.sim.rng.int(1_000, 30_000) : this.sim.rng.int(5, 60);
    if (this.sim.faultsOn && actor.canCrash && this.sim.rng.chance(this.faults.pause)) {
      latency += this.sim.rng.int(30_000, 120_000);
    }
    // A put's body when it is bytes (a metadata file's JSON), for a pause placed by what it writes.
    const body =
      name === 'PutObjectCommand' &&
      key.endsWith('.metadata.json') &&
      (typeof input.Body === 'string' || input.Body instanceof Uint8Array)
        ? bytesOf(input.Body)
        : undefined;
    latency += this.pauseBefore?.(actor, name, key, body) ?? 0;
    return this.sim.call(actor, latency, `${name} ${key}`, (control) => {
      const faulty = this.sim.faultsOn;
      const rng = this.sim.rng;
      const write = name === 'PutObjectCommand' || name === 'DeleteObjectsCommand';
      const conditional = input.IfMatch !== undefined || input.IfNoneMatch !== undefined;
      const op = opOf(name);
      const note = (result: string) =>
        this.events.push({ t: this.sim.now, actor, op, key: keyOf(input), result });
      // The swap of an Iceberg table's metadata is where a crash matters most, and at the
      // profiles' rates it was met by 2 seeds in 600: crashes there are made more likely.
      const crash =
        METADATA_SWAP.test(keyOf(input)) ||
        (write && keyOf(input) === FORMAT_RECORD) ||
        (write && this.crashAtLockAndTombstone && LOCK_OR_TOMBSTONE.test(keyOf(input)))
          ? this.faults.crash * SWAP_CRASH_FACTOR
          : this.faults.crash;
      if (faulty && actor.canCrash && rng.chance(crash / 2)) {
        note('crash-before');
        control.kill(`before ${name} ${keyOf(input)}`);
        return undefined;
      }
      if (faulty && this.#inOutage(keyOf(input))) {
        note('503 SlowDown');
        this.sim.log(actor, `${op} ${keyOf(input)} → 503 SlowDown (the key's outage)`);
        throw new SdkError('SlowDown', 503, 'Please reduce your request rate.');
      }
      if (faulty && rng.chance(this.faults.slowDown)) {
        note('503 SlowDown');
        this.sim.log(actor, `${op} ${keyOf(input)} → 503 SlowDown`);
        throw new SdkError('SlowDown', 503, 'Please reduce your request rate.');
      }
      if (
        faulty &&
        name === 'PutObjectCommand' &&
        conditional &&
        (this.#inManifestConflict(keyOf(input)) || rng.chance(this.faults.conflict))
      ) {
        note('409 ConditionalRequestConflict');
        this.sim.log(actor, `${op} ${keyOf(input)} → 409 ConditionalRequestConflict`);
        throw new SdkError(
          'ConditionalRequestConflict',
          409,
          'A conflicting conditional operation is currently in progress against this resource.',
        );
      }
      let result = this.#apply(actor, name, input, note);
      if (faulty && write && rng.chance(this.faults.lost)) {
        // The answer never came back; the SDK sends the same request again, and its answer counts.
        this.sim.log(actor, `${op} ${keyOf(input)}: answer lost, SDK retries`);
        result = this.#apply(actor, name, input, note, ' (SDK retry)');
      }
      if (faulty && actor.canCrash && rng.chance(crash / 2)) {
        note('crash-after');
        control.kill(`after ${name} ${keyOf(input)}`);
      } else if (actor.canCrash && this.crashAfter?.(actor, name, keyOf(input))) {
        note('crash-after');
        control.kill(`after ${name} ${keyOf(input)} (the scenario's)`);
      }
      return result;
    });
  }

  /** True while a conditional put of `key`, a manifest, meets 409 (a put may start a spell: see `manifestConflicts`). */
  #inManifestConflict(key: string): boolean {
    const spells = this.manifestConflicts;
    if (!spells || !MANIFEST.test(key)) return false;
    const until = this.#conflictUntil.get(key);
    if (until === undefined || until <= this.sim.now) {
      if (!spells.rng.chance(spells.chance)) return false;
      this.#conflictUntil.set(key, this.sim.now + spells.rng.int(2_000, 6_000));
    }
    spells.met++;
    return true;
  }

  /** True while `key` is in an outage (a call may start one: see `outages`). */
  #inOutage(key: string): boolean {
    // One key's, not a listing's (a listing's key here is its prefix and `*`).
    if (!this.outages || !key.startsWith('state/') || key.endsWith('*')) return false;
    const until = this.#outageUntil.get(key);
    if (until !== undefined && until > this.sim.now) return true;
    if (!this.outages.rng.chance(this.outages.chance)) return false;
    this.#outageUntil.set(key, this.sim.now + this.outages.rng.int(5_000, 30_000));
    return true;
  }

  #apply(
    actor: Actor,
    name: string,
    input: Record<string, unknown>,
    note: (result: string) => void,
    retry = '',
  ): unknown {
    try {
      const result = this.#applyOnce(actor, name, input);
      note(`ok${retry}`);
      if (this.sim.traceOn && name !== 'GetObjectCommand' && name !== 'ListObjectsV2Command') {
        this.sim.log(actor, `${opOf(name)} ${keyOf(input)}${conditionOf(input)} ok${retry}`);
      }
      return result;
    } catch (error) {
      const status = (error as SdkError).$metadata?.httpStatusCode;
      note(`${status} ${(error as Error).name}${retry}`);
      if (status !== 404 || name !== 'GetObjectCommand') {
        this.sim.log(actor, `${opOf(name)} ${keyOf(input)}${conditionOf(input)} → ${status}${retry}`);
      }
      throw error;
    }
  }

  #applyOnce(actor: Actor, name: string, input: Record<string, unknown>): unknown {
    switch (name) {
      case 'PutObjectCommand': {
        const key = String(input.Key);
        const current = this.objects.get(key);
        if (input.IfNoneMatch === '*' && current) {
          throw new SdkError(
            'PreconditionFailed',
            412,
            'At least one of the pre-conditions you specified did not hold',
          );
        }
        if (input.IfMatch !== undefined) {
          if (!current) throw new SdkError('NoSuchKey', 404, 'The specified key does not exist.');
          if (current.etag !== unquote(String(input.IfMatch))) {
            throw new SdkError(
              'PreconditionFailed',
              412,
              'At least one of the pre-conditions you specified did not hold',
            );
          }
        }
        const body = bytesOf(input.Body);
        const etag = `e${++this.#etags}`;
        this.objects.set(key, { body, etag, writtenAt: this.sim.now });
        for (const listen of this.listeners) listen(actor, 'put', key, body);
        return { ETag: `"${etag}"` };
      }
      case 'GetObjectCommand': {
        const found = this.objects.get(String(input.Key));
        if (!found) throw new SdkError('NoSuchKey', 404, 'The specified key does not exist.');
        const range = /^bytes=(\d+)-(\d+)$/.exec(String(input.Range ?? ''));
        const whole = found.body;
        const body = new Uint8Array(range ? whole.subarray(Number(range[1]), Number(range[2]) + 1) : whole);
        for (const listen of this.listeners) listen(actor, 'get', String(input.Key), undefined);
        return {
          Body: { transformToByteArray: async () => body },
          ETag: `"${found.etag}"`,
          // S3's stamp of the write, by its own clock, in whole seconds.
          LastModified: new Date(Math.floor(found.writtenAt / 1000) * 1000),
          ...(range && {
            ContentRange: `bytes ${range[1]}-${Number(range[1]) + body.length - 1}/${whole.length}`,
          }),
        };
      }
      case 'ListObjectsV2Command': {
        const prefix = String(input.Prefix ?? '');
        const after = input.ContinuationToken === undefined ? undefined : String(input.ContinuationToken);
        const max = Number(input.MaxKeys ?? 1000);
        const keys = this.keys(prefix).filter((k) => after === undefined || k > after);
        const page = keys.slice(0, max);
        const truncated = keys.length > max;
        return {
          Contents: page.map((Key) => ({ Key })),
          IsTruncated: truncated,
          ...(truncated ? { NextContinuationToken: page[page.length - 1] } : {}),
          KeyCount: page.length,
        };
      }
      case 'DeleteObjectsCommand': {
        const del = input.Delete as { Objects: Array<{ Key: string }> };
        for (const { Key } of del.Objects) {
          if (this.objects.delete(Key)) {
            for (const listen of this.listeners) listen(actor, 'delete', Key, undefined);
          }
        }
        return { Errors: [] };
      }
      default:
        throw new Error(`the simulated S3 does not implement ${name}`);
    }
  }
}

function opOf(name: string): StorageEvent['op'] {
  if (name === 'PutObjectCommand') return 'put';
  if (name === 'GetObjectCommand') return 'get';
  if (name === 'ListObjectsV2Command') return 'list';
  return 'delete';
}

function keyOf(input: Record<string, unknown>): string {
  if (input.Key !== undefined) return String(input.Key);
  if (input.Prefix !== undefined) return `${String(input.Prefix)}*`;
  const del = input.Delete as { Objects?: Array<{ Key: string }> } | undefined;
  const keys = del?.Objects?.map((o) => o.Key) ?? [];
  return keys.length === 1 ? keys[0]! : `[${keys.length} keys] ${keys[0] ?? ''}…`;
}

function conditionOf(input: Record<string, unknown>): string {
  if (input.IfNoneMatch !== undefined) return ' if-none-match';
  if (input.IfMatch !== undefined) return ` if-match ${String(input.IfMatch)}`;
  return '';
}

/** S3 lists keys in UTF-8 byte order; for the ASCII keys of the layout that is code unit order. */
export const compareKeys = (a: string, b: string): number => (a < b ? -1 : a > b ? 1 : 0);
