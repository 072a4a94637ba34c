import { type Logger, pino } from "pino";

/**
 * The JSON logger of one of the programs' services, each line tagged with the service that wrote
 * it: `consentd` or `consent-gateway`, also when `npm start` runs both in one process.
 */
export function serviceLogger(level: string, service: "consentd" | "consent-gateway"): Logger {
  return pino({ level, base: { service } });
}
