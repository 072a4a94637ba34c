/** Source of the current time; tests pass a controllable one. */
export type Clock = () => Date;

export const systemClock: Clock = () => new Date();

/**
 * How far apart the clocks of daemons sharing a store may read: NTP keeps them within
 * milliseconds, and this leaves room for more. Times another daemon wrote are judged with it.
 */
export const CLOCK_SKEW_MS = 5_000;
