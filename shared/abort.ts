/**
 * `work`, or a rejection with the signal's reason as soon as `signal` aborts: what `work` was
 * doing is left to end by itself (a file system that never answers, a sleep between looks at a
 * lock). Without a signal, `work` itself.
 */
export function untilAborted<T>(work: Promise<T>, signal: AbortSignal | undefined): Promise<T> {
  if (signal === undefined) return work;
  if (signal.aborted) return Promise.reject(signal.reason);
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(signal.reason);
    signal.addEventListener('abort', onAbort, { once: true });
    work.then(resolve, reject).finally(() => signal.removeEventListener('abort', onAbort));
  });
}
