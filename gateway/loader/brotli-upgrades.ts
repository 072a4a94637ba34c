import { performance } from "node:perf_hooks";
import { constants } from "node:zlib";
import { type ErrorLogger, repeatedFailureLog } from "#daemon/logging.js";
import { brotliBody, type LoaderVariant } from "#gateway/loader/loader-response.js";

/** A response to recompress at brotli's highest quality, for as long as it is still kept. */
export interface BrotliUpgrade {
  variant: LoaderVariant;
  /** Whether the cache still keeps the response: one dropped meanwhile is not recompressed. */
  kept(): boolean;
  /** Told once `variant.br` was replaced, with the bytes it gained (negative: it shrank). */
  replaced(bytes: number): void;
}

/** Responses waiting for their turn; beyond, a request is not queued (the next ask queues it). */
const MAX_PENDING = 64;
/**
 * After each recompression the queue rests three times as long as it took: recompressing takes
 * at most a quarter of one thread of libuv's pool (some 40 ms of CPU every 160 ms), whatever
 * the number of locations asked for.
 */
const REST_PER_BUSY = 3;

/**
 * Recompresses loader responses at brotli's highest quality in the background (decisions §6): one
 * at a time, resting between, at most MAX_PENDING waiting. A response is built and served at once
 * at FIRST_BROTLI_QUALITY (loader-response.ts); the loader cache asks for its recompression when
 * it is asked for again, so locations asked for once (a proxy's header cycling through region
 * codes) cost about 3 ms each instead of some 45, and the ones visitors come back to get the
 * smaller body within seconds.
 */
export class BrotliUpgrades {
  readonly #pending: BrotliUpgrade[] = [];
  /** Responses pending or being recompressed: each is queued once. */
  readonly #queued = new Set<LoaderVariant>();
  #running = false;
  readonly #failed?: (error: unknown) => void;

  constructor(logger?: ErrorLogger) {
    this.#failed = logger && repeatedFailureLog(logger, "loader response not recompressed");
  }

  /** Queues a response built below the highest quality, unless queued or the queue is full. */
  request(upgrade: BrotliUpgrade): void {
    const { variant } = upgrade;
    if (variant.brotliQuality >= constants.BROTLI_MAX_QUALITY || this.#queued.has(variant)) return;
    if (this.#pending.length >= MAX_PENDING) return;
    this.#queued.add(variant);
    this.#pending.push(upgrade);
    if (!this.#running) {
      this.#running = true;
      void this.#drain();
    }
  }

  async #drain(): Promise<void> {
    for (let next = this.#pending.shift(); next; next = this.#pending.shift()) {
      const started = performance.now();
      if (next.kept()) await this.#recompress(next);
      this.#queued.delete(next.variant);
      const busy = performance.now() - started;
      // The timer holds no process open: a gateway shutting down leaves the rest undone.
      if (busy >= 1) await new Promise((rest) => setTimeout(rest, busy * REST_PER_BUSY).unref());
    }
    this.#running = false;
  }

  async #recompress({ variant, kept, replaced }: BrotliUpgrade): Promise<void> {
    let br: Buffer;
    try {
      br = await brotliBody(variant.identity, constants.BROTLI_MAX_QUALITY);
    } catch (error) {
      // The response stays served as first built.
      this.#failed?.(error);
      return;
    }
    if (!kept()) return;
    variant.brotliQuality = constants.BROTLI_MAX_QUALITY;
    // Kept only when smaller: the bytes served never grow.
    if (br.length >= variant.br.length) return;
    const gained = br.length - variant.br.length;
    variant.br = br;
    replaced(gained);
  }
}
