/**
 * Countries and regions as jurisdiction rules name them and the trusted geo header sends them.
 */

/**
 * The ISO 3166-1 alpha-2 codes officially assigned, and XK (Kosovo, user-assigned), which geo
 * headers such as CF-IPCountry send. A rule naming any other code could never match a visitor:
 * `UK` is the trap (the United Kingdom is `GB`), and `XX`/`T1` (Cloudflare) or `EU`/`A1`/`ZZ`
 * (other providers) are what a geo header sends for a location that is no country, which the
 * loader reads as no location (gateway/loader/runtime-config.ts).
 */
const COUNTRY_CODES = new Set(
  `AD AE AF AG AI AL AM AO AQ AR AS AT AU AW AX AZ BA BB BD BE BF BG BH BI BJ BL BM BN BO BQ
  BR BS BT BV BW BY BZ CA CC CD CF CG CH CI CK CL CM CN CO CR CU CV CW CX CY CZ DE DJ DK DM
  DO DZ EC EE EG EH ER ES ET FI FJ FK FM FO FR GA GB GD GE GF GG GH GI GL GM GN GP GQ GR GS
  GT GU GW GY HK HM HN HR HT HU ID IE IL IM IN IO IQ IR IS IT JE JM JO JP KE KG KH KI KM KN
  KP KR KW KY KZ LA LB LC LI LK LR LS LT LU LV LY MA MC MD ME MF MG MH MK ML MM MN MO MP MQ
  MR MS MT MU MV MW MX MY MZ NA NC NE NF NG NI NL NO NP NR NU NZ OM PA PE PF PG PH PK PL PM
  PN PR PS PT PW PY QA RE RO RS RU RW SA SB SC SD SE SG SH SI SJ SK SL SM SN SO SR SS ST SV
  SX SY SZ TC TD TF TG TH TJ TK TL TM TN TO TR TT TV TW TZ UA UG UM US UY UZ VA VC VE VG VI
  VN VU WF WS XK YE YT ZA ZM ZW`.split(/\s+/),
);

/** Whether `code` is an assigned ISO 3166-1 alpha-2 code (or XK). */
export function isCountryCode(code: string): boolean {
  return COUNTRY_CODES.has(code);
}

/** Whether `code` is an ISO 3166-2 code ("US-CA") of a country isCountryCode accepts. */
export function isRegionCode(code: string): boolean {
  return /^[A-Z]{2}-[A-Z0-9]{1,3}$/.test(code) && COUNTRY_CODES.has(code.slice(0, 2));
}
