/**
 * Calls `onPassed` once `ms` have passed, unless the returned function cancels it first, and not
 * before the event loop has read what arrived meanwhile. Node runs timers before it polls its
 * sockets, so after a loop held past the bound (a long synchronous task) a plain timer would judge
 * an answer already on the socket as missing: the verdict waits for one setImmediate, which runs
 * after that poll, and an answer read there cancels it. The timer is unref'd: a bound keeps no
 * process alive.
 */
export function startBound(ms: number, onPassed: () => void): () => void {
  let verdict: NodeJS.Immediate | undefined;
  const timer = setTimeout(() => {
    verdict = setImmediate(onPassed);
  }, ms);
  timer.unref();
  return () => {
    clearTimeout(timer);
    if (verdict) clearImmediate(verdict);
  };
}
