import { type Logger, pino } from "pino";

/**
 * The JSON loggers of the programs' two services, each line tagged with the service that wrote
 * it: `consentd` or `consent-gateway`. Both are children of one logger, so when `npm start` runs
 * both in one process their lines go out through one writer and never interleave.
 */
export function serviceLoggers(level: string): { daemon: Logger; gateway: Logger } {
  const root = pino({ level, base: null });
  return {
    daemon: root.child({ service: "consentd" }),
    gateway: root.child({ service: "consent-gateway" }),
  };
}
