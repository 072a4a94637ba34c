/**
 * Runs `work` while counting turns of the event loop (a chain of setImmediate): how often the
 * process could have served something else meanwhile. Returns the work's result and the count.
 */
export async function turnsDuring<T>(
  work: () => Promise<T>,
): Promise<{ result: T; turns: number }> {
  let turns = 0;
  let turning = true;
  const turn = () => {
    turns += 1;
    if (turning) setImmediate(turn);
  };
  setImmediate(turn);
  try {
    return { result: await work(), turns };
  } finally {
    turning = false;
  }
}
