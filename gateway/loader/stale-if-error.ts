/**
 * Stale-if-error: a banner whose read fails because the daemon (or its store) cannot answer
 * (isDaemonUnavailable, errors.ts) is served as it was last read for up to a day after that read.
 * A daemon restarting in a rolling upgrade, or down for a night, then costs no site its banner
 * (without it no consent is asked and gated scripts never run). Beyond a day the gateway has been
 * cut off long enough that what it holds may no longer be what the operator wants shown, and it
 * answers 503 as for a banner it never served. An operator who deactivates or republishes a banner
 * meanwhile reaches visitors of this gateway once it reaches a daemon again: nothing it cannot
 * reach could tell it sooner.
 */
export const STALE_IF_ERROR_MS = 24 * 60 * 60_000;
/**
 * While a banner is served stale, the daemon is asked for it again at most this often (one read
 * in flight per banner; requests meanwhile are answered at once), so a daemon back from a restart
 * is read within seconds, and one that is struggling gets one call per banner every 5 s.
 */
export const STALE_RETRY_MS = 5_000;
/**
 * How long a request for a banner held in memory waits for its re-read before it is answered
 * from the held copy, marked stale, while the read goes on. A daemon that stopped answering (a
 * stalled process or store) fails a read only at the transport's ping timeout, about 15 s, and a
 * loader is a script in the site's `<head>`: past this bound the page is held for want of an
 * answer the gateway can already give. A daemon that answers takes milliseconds (tens with
 * MongoDB, a connection made included), so 2 s is far above any healthy read, and no request
 * is served the held copy for a merely slow one; it is also well under the wait a visitor notices
 * as a page that does not load. A banner never read has no copy to serve and waits as before.
 */
export const HELD_READ_WAIT_MS = 2_000;
