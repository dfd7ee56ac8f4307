/**
 * A storage that dies: it passes calls through to a real one until a chosen call, which fails
 * with `Crash`, and so does every call after it — what a process killed at that point leaves
 * is exactly what the real storage holds then. Lets a test stop a run at a precise step.
 */
import type { PutOptions, Storage } from '../../shared/storage/storage.js';

export class Crash extends Error {
  constructor(at: string) {
    super(`crashed at ${at}`);
    this.name = 'Crash';
  }
}

export type StorageCall = { op: 'put' | 'putStream' | 'get' | 'list' | 'delete'; key: string };

/** Wraps `inner`; `crashWhen` sees every call and says whether the process dies at it. */
export function crashingStorage(inner: Storage, crashWhen: (call: StorageCall) => boolean): Storage {
  let dead: string | undefined;
  const gate = (call: StorageCall) => {
    if (dead) throw new Crash(dead);
    if (crashWhen(call)) {
      dead = `${call.op} ${call.key}`;
      throw new Crash(dead);
    }
  };
  return {
    location: inner.location,
    async put(key: string, body: Uint8Array | string, options?: PutOptions) {
      gate({ op: 'put', key });
      return inner.put(key, body, options);
    },
    async putStream(key, chunks, options) {
      gate({ op: 'putStream', key });
      return inner.putStream(key, chunks, options);
    },
    async get(key) {
      gate({ op: 'get', key });
      return inner.get(key);
    },
    async getStream(key) {
      gate({ op: 'get', key });
      return inner.getStream(key);
    },
    async *list(prefix) {
      gate({ op: 'list', key: prefix });
      yield* inner.list(prefix);
    },
    async delete(keys) {
      gate({ op: 'delete', key: keys[0] ?? '' });
      return inner.delete(keys);
    },
    stats: () => inner.stats(),
  };
}

/** Counts calls matching `match` and says to crash at the `n`-th (1-based). */
export function atNth(n: number, match: (call: StorageCall) => boolean): (call: StorageCall) => boolean {
  let seen = 0;
  return (call) => match(call) && ++seen === n;
}
