import { channel } from "node:diagnostics_channel";
import { performance } from "node:perf_hooks";
import { constants } from "node:zlib";
import { type ErrorLogger, repeatedFailureLog } from "#daemon/logging.js";
import { brotliBody, type LoaderVariant } from "#gateway/loader/loader-response.js";

/**
 * The diagnostics channel a recompression is published on as it starts, with the response's
 * `hash` (its ETags' digest): what the queue costs, seen from outside it.
 */
export const RECOMPRESSION_CHANNEL = "consent.loader.recompression";
const recompressions = channel(RECOMPRESSION_CHANNEL);

/**
 * A response to recompress at brotli's highest quality, named by the build the cache made of it:
 * a queued upgrade holds none of its bytes, so a response the cache drops, evicts or replaces
 * meanwhile leaves memory at once, and the bytes a gateway keeps stay within its budget
 * (CONSENT_LOADER_CACHE_MB) whatever is queued.
 */
export interface BrotliUpgrade {
  /** The build of the response, unique within its cache: each is queued once. */
  build: number;
  /**
   * The response while the cache still keeps this build of it, else undefined: looked up when
   * asked for, when its turn comes and once recompressed.
   */
  kept(): LoaderVariant | undefined;
  /** Told once the kept response's `br` was replaced, with the bytes it gained (negative: it shrank). */
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

/** Whether a response's brotli body was built below the highest quality: one to recompress. */
export function belowTopQuality(variant: LoaderVariant): boolean {
  return variant.brotliQuality < constants.BROTLI_MAX_QUALITY;
}

/**
 * Recompresses loader responses at brotli's highest quality in the background (decisions §6): one
 * at a time, resting between, at most MAX_PENDING waiting. A response is built and served at once
 * at FIRST_BROTLI_QUALITY (loader-response.ts); the loader cache asks for its recompression when
 * it is asked for again, so locations asked for once (a proxy's header cycling through region
 * codes) cost about 3 ms each instead of some 45, and the ones visitors come back to get the
 * smaller body within seconds. Stopped when the gateway closes.
 */
export class BrotliUpgrades {
  readonly #pending: BrotliUpgrade[] = [];
  /** The builds pending or being recompressed. */
  readonly #queued = new Set<number>();
  #running = false;
  #stopped = false;
  readonly #failed?: (error: unknown) => void;

  constructor(logger?: ErrorLogger) {
    this.#failed = logger && repeatedFailureLog(logger, "loader response not recompressed");
  }

  /**
   * Queues a kept response built below the highest quality, unless queued, the queue is full or
   * stopped.
   */
  request(upgrade: BrotliUpgrade): void {
    if (this.#stopped || this.#queued.has(upgrade.build)) return;
    if (this.#pending.length >= MAX_PENDING) return;
    const variant = upgrade.kept();
    if (!variant || !belowTopQuality(variant)) return;
    this.#queued.add(upgrade.build);
    this.#pending.push(upgrade);
    if (!this.#running) {
      this.#running = true;
      void this.#drain();
    }
  }

  /**
   * Starts no further recompression and drops the queue, for good: a gateway closing (its drain)
   * spends no CPU on bodies it will not serve. One in progress ends as it would.
   */
  stop(): void {
    this.#stopped = true;
    this.#pending.length = 0;
    this.#queued.clear();
  }

  async #drain(): Promise<void> {
    for (let next = this.#pending.shift(); next; next = this.#pending.shift()) {
      const started = performance.now();
      await this.#recompress(next);
      this.#queued.delete(next.build);
      const busy = performance.now() - started;
      // The timer holds no process open: a gateway shutting down leaves the rest undone.
      if (busy >= 1) await new Promise((rest) => setTimeout(rest, busy * REST_PER_BUSY).unref());
    }
    this.#running = false;
  }

  async #recompress(upgrade: BrotliUpgrade): Promise<void> {
    // One dropped, evicted or replaced while it waited is not recompressed.
    const variant = upgrade.kept();
    if (!variant || !belowTopQuality(variant)) return;
    if (recompressions.hasSubscribers) recompressions.publish({ hash: variant.hash });
    let br: Buffer;
    try {
      br = await brotliBody(variant.identity, constants.BROTLI_MAX_QUALITY);
    } catch (error) {
      // The response stays served as first built.
      this.#failed?.(error);
      return;
    }
    if (upgrade.kept() !== variant) return;
    variant.brotliQuality = constants.BROTLI_MAX_QUALITY;
    // Kept only when smaller: the bytes served never grow.
    if (br.length >= variant.br.length) return;
    const gained = br.length - variant.br.length;
    variant.br = br;
    upgrade.replaced(gained);
  }
}
