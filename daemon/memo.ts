/**
 * `compute` remembered per key, in this process's memory, for at most `max` keys: the whole memory
 * is emptied when it is full, so it stays small under a flood of keys and needs no bookkeeping of
 * its own. For values that never change for their key (a digest, a decryption, a check built
 * from a secret).
 */
export function boundedMemo<K, V>(max: number, compute: (key: K) => V): (key: K) => V {
  const remembered = new Map<K, V>();
  return (key) => {
    let value = remembered.get(key);
    if (value === undefined) {
      value = compute(key);
      if (remembered.size >= max) remembered.clear();
      remembered.set(key, value);
    }
    return value;
  };
}
