/**
 * A shim for `setInterval`/`clearInterval` (and `setTimeout`/`clearTimeout`) while a seed runs: called from inside an actor (the
 * CLI's lock renewal in shared/export/run/local-run.ts still uses a real interval), it becomes a
 * virtual interval of that actor, fired by the scheduler and dropped when the actor dies;
 * called from anywhere else, it is the real one. Once the core renews through `deps.sleep`,
 * nothing in the simulated path calls it and the shim is idle.
 */
import { currentActor, type Sim } from './scheduler.js';

const SIM_TIMER = Symbol('sim-timer');

interface SimTimer {
  [SIM_TIMER]: () => void;
  unref(): SimTimer;
  ref(): SimTimer;
  hasRef(): boolean;
}

/** Installs the shim for `sim`; returns the function that restores the real timers. */
/** A timer handle on the virtual clock, which `cancel` stops (`unref` and `ref` do nothing there). */
function simTimer(cancel: () => void): SimTimer {
  const timer: SimTimer = {
    [SIM_TIMER]: cancel,
    unref: () => timer,
    ref: () => timer,
    hasRef: () => false,
  };
  return timer;
}

export function installTimerShim(sim: Sim): () => void {
  const realSetInterval = globalThis.setInterval;
  const realClearInterval = globalThis.clearInterval;
  const realSetTimeout = globalThis.setTimeout;
  const realClearTimeout = globalThis.clearTimeout;
  const shimSet = (fn: (...args: unknown[]) => void, ms?: number, ...args: unknown[]) => {
    const actor = currentActor();
    if (!actor) return realSetInterval(fn, ms, ...args);
    return simTimer(sim.every(actor, Math.max(1, ms ?? 1), () => fn(...args)));
  };
  const shimClear = (timer: unknown) => {
    if (timer && typeof timer === 'object' && SIM_TIMER in timer) (timer as SimTimer)[SIM_TIMER]();
    else realClearInterval(timer as Parameters<typeof clearInterval>[0]);
  };
  // A one-shot timer of an actor: `limiterUntil`'s deadline (shared/api/deadline-limiter.ts),
  // which now meets a limiter that makes callers wait (the request budget, budget.ts).
  const shimSetTimeout = (fn: (...args: unknown[]) => void, ms?: number, ...args: unknown[]) => {
    const actor = currentActor();
    if (!actor) return realSetTimeout(fn, ms, ...args);
    const cancel = sim.every(actor, Math.max(1, ms ?? 1), () => {
      cancel();
      fn(...args);
    });
    return simTimer(cancel);
  };
  const shimClearTimeout = (timer: unknown) => {
    if (timer && typeof timer === 'object' && SIM_TIMER in timer) (timer as SimTimer)[SIM_TIMER]();
    else realClearTimeout(timer as Parameters<typeof clearTimeout>[0]);
  };
  globalThis.setInterval = shimSet as unknown as typeof setInterval;
  globalThis.clearInterval = shimClear as typeof clearInterval;
  globalThis.setTimeout = shimSetTimeout as unknown as typeof setTimeout;
  globalThis.clearTimeout = shimClearTimeout as typeof clearTimeout;
  return () => {
    globalThis.setInterval = realSetInterval;
    globalThis.clearInterval = realClearInterval;
    globalThis.setTimeout = realSetTimeout;
    globalThis.clearTimeout = realClearTimeout;
  };
}
