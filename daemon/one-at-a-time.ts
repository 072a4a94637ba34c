/** Runs `task` once the tasks given before for the same key have settled; see oneAtATimePerKey. */
export type OneAtATime = <T>(key: string, task: () => Promise<T>) => Promise<T>;

/**
 * Tasks of one key run one after another in this process, in the order given; tasks of other
 * keys are not held. A task starts once the one before it has settled, whether it succeeded or
 * failed, so a failure never blocks the next, and its caller alone sees its outcome. A key is
 * forgotten once its last task has settled: the map holds only keys with work, however many
 * keys come and go.
 */
export function oneAtATimePerKey(): OneAtATime {
  /** Per key, the last task's settling, which never rejects. */
  const lastSettled = new Map<string, Promise<void>>();
  return (key, task) => {
    const result = (lastSettled.get(key) ?? Promise.resolve()).then(task);
    const settled = result.then(
      () => undefined,
      () => undefined,
    );
    lastSettled.set(key, settled);
    void settled.then(() => {
      if (lastSettled.get(key) === settled) lastSettled.delete(key);
    });
    return result;
  };
}
