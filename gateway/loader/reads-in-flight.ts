/**
 * Counts a loader cache's reads of one kind in flight against `max` (first-reads.ts for banners
 * with no copy to serve, held-reads.ts for the re-reads of banners held): a read counts from its
 * start until it settles, however long after its requests were answered.
 */
export class ReadsInFlight {
  #inFlight = 0;

  constructor(readonly max: number) {}

  /** Starts `read`, counted until it settles; undefined at the bound, `read` not started. */
  start<T>(read: () => Promise<T>): Promise<T> | undefined {
    if (this.#inFlight >= this.max) return undefined;
    this.#inFlight += 1;
    const reading = read();
    const settled = () => {
      this.#inFlight -= 1;
    };
    reading.then(settled, settled);
    return reading;
  }
}
