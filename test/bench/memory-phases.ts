/**
 * Splits a process's peak memory by the phase of a run it was in, for the memory benchmarks
 * (`cli-memory`). A phase's peak RSS is exact: the kernel's high-water mark (VmHWM) is read and
 * reset (`/proc/self/clear_refs`, 5) at each change of phase. Its make-up (V8 heap used and
 * reserved, external memory and ArrayBuffers, the rest: code, stacks, the allocator's) is that
 * of the sample with the highest RSS, sampled every few milliseconds (a sample cannot land
 * inside a long synchronous step, so that make-up is near the peak, not at it). With `live`,
 * a full collection is forced at every sample (node --expose-gc): what is left is what the run
 * holds, and the peaks then show live memory, not a normal run's.
 *
 * Phases of a finish are told apart by the storage requests the closing makes (`phaseStorage`):
 * the closing record written, each published output's stream, the manifest, the tombstone.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { getHeapSpaceStatistics } from 'node:v8';
import type { Storage } from '../../shared/storage/storage.js';

const MiB = 2 ** 20;

export interface PhaseFigures {
  /** Peak RSS in the phase (VmHWM), MiB. */
  peak_rss_mb: number;
  /** Seconds spent in the phase (summed over its visits). */
  seconds: number;
  /** The make-up of the sample with the highest RSS, MiB. */
  at_peak: {
    rss: number;
    heap_used: number;
    heap_total: number;
    external: number;
    array_buffers: number;
    code: number;
    /** RSS less V8's heap and external memory: code, stacks, the allocator's own, the loader's. */
    other: number;
  };
  /** The highest heap used and external memory sampled (with `live`: after a full collection). */
  max_heap_used: number;
  max_external: number;
}

function vmHwmBytes(): number {
  const status = readFileSync('/proc/self/status', 'utf8');
  return Number(/^VmHWM:\s+(\d+) kB/m.exec(status)?.[1]) * 1024;
}

function resetHwm(): void {
  // "5" resets the peak RSS of the process (proc(5), clear_refs). Not allowed everywhere: then
  // a phase's peak is the process's so far, which the sampled make-up still tells apart.
  try {
    writeFileSync('/proc/self/clear_refs', '5');
  } catch {
    // Kept as the process's peak so far (see above).
  }
}

const codeBytes = (): number =>
  getHeapSpaceStatistics()
    .filter((s) => s.space_name.startsWith('code'))
    .reduce((n, s) => n + s.physical_space_size, 0);

/** Tracks phases; `enter(name)` closes the current phase and starts `name` (a phase may come back). */
export class MemoryPhases {
  readonly #phases = new Map<string, PhaseFigures>();
  #current: string;
  #since = performance.now();
  readonly #sampler: NodeJS.Timeout;
  readonly #gc: (() => void) | undefined;

  constructor(first: string, options: { sampleMs: number; live?: boolean }) {
    this.#current = first;
    this.#gc = options.live ? (globalThis as { gc?: () => void }).gc : undefined;
    if (options.live && !this.#gc) throw new Error('live memory needs node --expose-gc');
    resetHwm();
    this.#sampler = setInterval(() => this.#sample(), options.sampleMs);
  }

  get current(): string {
    return this.#current;
  }

  #figures(name: string): PhaseFigures {
    let found = this.#phases.get(name);
    if (!found) {
      found = {
        peak_rss_mb: 0,
        seconds: 0,
        at_peak: { rss: 0, heap_used: 0, heap_total: 0, external: 0, array_buffers: 0, code: 0, other: 0 },
        max_heap_used: 0,
        max_external: 0,
      };
      this.#phases.set(name, found);
    }
    return found;
  }

  #sample(): void {
    this.#gc?.();
    const m = process.memoryUsage();
    const f = this.#figures(this.#current);
    f.max_heap_used = Math.max(f.max_heap_used, m.heapUsed / MiB);
    f.max_external = Math.max(f.max_external, m.external / MiB);
    if (m.rss / MiB > f.at_peak.rss) {
      f.at_peak = {
        rss: m.rss / MiB,
        heap_used: m.heapUsed / MiB,
        heap_total: m.heapTotal / MiB,
        external: m.external / MiB,
        array_buffers: m.arrayBuffers / MiB,
        code: codeBytes() / MiB,
        other: (m.rss - m.heapTotal - m.external) / MiB,
      };
    }
  }

  #close(): void {
    this.#sample();
    const f = this.#figures(this.#current);
    f.peak_rss_mb = Math.max(f.peak_rss_mb, vmHwmBytes() / MiB);
    const now = performance.now();
    f.seconds += (now - this.#since) / 1000;
    this.#since = now;
  }

  enter(name: string): void {
    if (name === this.#current) return;
    this.#close();
    resetHwm();
    this.#current = name;
  }

  /** Stops sampling; the figures of every phase, in the order they were first entered. */
  stop(): Record<string, PhaseFigures> {
    clearInterval(this.#sampler);
    this.#close();
    return Object.fromEntries(this.#phases);
  }
}

/** The group a published key belongs to: `parquet/<table>/…` → `<table>`, `raw/<entity>/…` → `raw.<entity>`. */
function groupOf(key: string): string {
  const [root, name] = key.split('/');
  return root === 'raw' ? `raw.${name}` : (name ?? key);
}

/**
 * `storage`, telling `phases` which step of a finish the run is in from what it writes: the
 * closing record (`close`: the run's records read, the closing's pieces written), each output
 * streamed (`publish:<group>[+<group>]`, two at once), the manifest (`state`: the incremental
 * state, the tombstone follow), the tombstone (`cleanup`). Before `begin()`, nothing changes.
 */
export function phaseStorage(storage: Storage, phases: MemoryPhases): Storage & { begin(): void } {
  let finishing = false;
  const streaming = new Map<string, number>();
  const publishPhase = () => {
    if (streaming.size > 0) phases.enter(`publish:${[...streaming.keys()].sort().join('+')}`);
    else phases.enter('publish:between');
  };
  const afterWrite = (key: string) => {
    if (!finishing) return;
    if (/^state\/runs\/[^/]+\/closing\.json$/.test(key) && phases.current === 'close')
      phases.enter('publish:between');
    else if (/^runs\//.test(key) && key.endsWith('.json')) phases.enter('state');
    else if (/^state\/runs\/[^/]+\/closed\.json$/.test(key)) phases.enter('cleanup');
  };
  return {
    location: storage.location,
    begin() {
      finishing = true;
      phases.enter('close');
    },
    async put(key, body, options) {
      const result = await storage.put(key, body, options);
      afterWrite(key);
      return result;
    },
    async putStream(key, chunks, options) {
      const group = groupOf(key);
      if (finishing) {
        streaming.set(group, (streaming.get(group) ?? 0) + 1);
        publishPhase();
      }
      try {
        return await storage.putStream(key, chunks, options);
      } finally {
        if (finishing) {
          const left = (streaming.get(group) ?? 1) - 1;
          if (left > 0) streaming.set(group, left);
          else streaming.delete(group);
          publishPhase();
        }
      }
    },
    get: (key) => storage.get(key),
    getStream: (key) => storage.getStream(key),
    ...(storage.getRange && {
      getRange: (key: string, start: number, end: number) => storage.getRange!(key, start, end),
    }),
    list: (prefix) => storage.list(prefix),
    delete: (keys) => storage.delete(keys),
    stats: () => storage.stats(),
  };
}
