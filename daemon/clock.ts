/** Source of the current time; tests pass a controllable one. */
export type Clock = () => Date;

export const systemClock: Clock = () => new Date();
