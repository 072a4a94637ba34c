import { request } from "node:http";

/** The calls of one store method held back by holdStoreCalls. */
export interface HeldCalls {
  /** How many calls have been made so far, held or let through. */
  readonly calls: number;
  /** Resolves once `count` calls have been made. */
  arrived(count: number): Promise<void>;
  /** Lets the held calls, and every later one, run on the store. */
  release(): void;
  /** Puts the store's own method back. */
  restore(): void;
}

/**
 * A store made slow where a test needs a call under way in it: each call of `target[name]` (a
 * method of the test's real store, such as `service.store.banners.listByTeam`) waits until
 * release(), then runs on the store as it is.
 */
export function holdStoreCalls<T extends object, K extends keyof T>(target: T, name: K): HeldCalls {
  const own = target[name] as (...args: unknown[]) => Promise<unknown>;
  let release = () => {};
  const gate = new Promise<void>((resolve) => {
    release = resolve;
  });
  let calls = 0;
  const waiting: { count: number; resolve: () => void }[] = [];
  const held = async (...args: unknown[]) => {
    calls++;
    for (const waiter of waiting) if (calls >= waiter.count) waiter.resolve();
    await gate;
    return own.apply(target, args);
  };
  target[name] = held as T[K];
  return {
    get calls() {
      return calls;
    },
    arrived: (count) =>
      calls >= count
        ? Promise.resolve()
        : new Promise((resolve) => {
            waiting.push({ count, resolve });
          }),
    release: () => release(),
    restore: () => {
      target[name] = own as T[K];
    },
  };
}

/**
 * A request to `url` sent whole, from a client that will leave before its answer: leave() closes
 * its connection. On a connection of its own (no keep-alive agent).
 */
export function leavingClient(
  url: string,
  method: string,
  headers: Record<string, string>,
  body?: string,
): { leave(): void } {
  const sent = request(url, { method, headers, agent: false });
  sent.on("error", () => {});
  sent.end(body);
  return { leave: () => sent.destroy() };
}
