import {
  decodedOrNot,
  withoutUserInfo,
  withoutUserInfoOf,
  withoutWordsOf,
} from "#daemon/config.js";

/**
 * A connection-string option whose value is a secret, by the name the driver reads (case does
 * not matter to it): the MongoDB connection-string spec's `tlsCertificateKeyFilePassword` and
 * `proxyPassword`, the proxy's user name (masked as user info is), the Node TLS options the
 * driver also takes from a URI (`key`, `passphrase`, `pfx`), and any other name holding
 * `pass`, `secret` or `token`: a misspelt or retired one (`sslPass`) is refused with the URI
 * quoted, which is when its value must not be printed.
 */
const SECRET_OPTION = /pass|secret|token|^(?:key|pfx|proxyusername)$/i;

/**
 * An `authMechanismProperties` entry whose value is a secret (`AWS_SESSION_TOKEN:…`, or any
 * name holding `pass` or `secret`); `TOKEN_RESOURCE`, an audience, is not one.
 */
const SECRET_PROPERTY = /pass|secret|token$/i;

/** A URI piece or a property name as the driver reads it: percent-decoded, `+` a space. */
function nameOf(raw: string): string {
  return decodedOrNot(raw.replace(/\+/g, " ")).trim();
}

/** The secrets of a connection string's options, masked in the URI and what the driver said. */
interface MaskedOptions {
  uri: string;
  /**
   * Pieces of a secret that the driver reads as options or properties of their own (a password
   * holding an unescaped `&`, `;` or `,`), and so may name alone in its message.
   */
  alone: string[];
}

/**
 * `uri` with the value of each secret option written `***`. A value runs to the next `&` or `;`
 * (a separator of old connection strings), and a following piece without `=` is taken for more
 * of it. An empty value stays empty, as the driver's words about it say.
 */
function maskedOptions(uri: string): MaskedOptions {
  const alone: string[] = [];
  let inSecret = false;
  const masked = uri.replace(/([?&;])([^?&;]*)/g, (_match, separator: string, piece: string) => {
    const equals = piece.indexOf("=");
    if (equals < 0) {
      if (!inSecret || piece === "") return `${separator}${piece}`;
      alone.push(piece);
      return `${separator}***`;
    }
    const rawName = piece.slice(0, equals);
    const value = piece.slice(equals + 1);
    const name = nameOf(rawName);
    if (SECRET_OPTION.test(name)) {
      inSecret = true;
      return `${separator}${rawName}=${value === "" ? "" : "***"}`;
    }
    inSecret = false;
    if (name.toLowerCase() !== "authmechanismproperties") return `${separator}${piece}`;
    const properties = maskedProperties(value, alone);
    inSecret = properties.endsInSecret;
    return `${separator}${rawName}=${properties.value}`;
  });
  return { uri: masked, alone };
}

/**
 * An `authMechanismProperties` value (`NAME:value,NAME:value`, commas and colons maybe
 * percent-encoded) with each secret property's value written `***`; an entry without a colon is
 * more of the value before it, as the driver reads a comma inside a value.
 */
function maskedProperties(
  value: string,
  alone: string[],
): { value: string; endsInSecret: boolean } {
  let inSecret = false;
  const entries = value.split(/(,|%2C)/i).map((entry, index) => {
    if (index % 2 === 1) return entry;
    const colon = /:|%3A/i.exec(entry);
    if (!colon) {
      if (!inSecret || entry === "") return entry;
      alone.push(entry);
      return "***";
    }
    const rawName = entry.slice(0, colon.index);
    inSecret = SECRET_PROPERTY.test(nameOf(rawName));
    const rest = entry.slice(colon.index + colon[0].length);
    return inSecret && rest !== "" ? `${rawName}${colon[0]}***` : entry;
  });
  return { value: entries.join(""), endsInSecret: inSecret };
}

/**
 * A connection string as it may be printed: its user info written `***@` (withoutUserInfo) and
 * the values of its secret options `***`.
 */
export function shownMongoUri(uri: string): string {
  return withoutUserInfo(maskedOptions(uri).uri);
}

/**
 * The driver's words about `uri` as they may be printed: without its user info
 * (withoutUserInfoOf), with any `name=value` or `NAME:value` of a secret option or property in
 * them masked, and the pieces of a secret the driver read as options of their own (`URI option
 * "rest-of-password" cannot be specified with no value`) written `***` where they stand apart
 * from letters and digits.
 */
export function driverWordsWithoutSecrets(uri: string, text: string): string {
  const hidden = withoutUserInfoOf(uri, text)
    .replace(SECRET_OPTION_IN_WORDS, (match, name: string) =>
      SECRET_OPTION.test(nameOf(name)) ? `${name}=***` : match,
    )
    .replace(SECRET_PROPERTY_IN_WORDS, (match, name: string, colon: string) =>
      SECRET_PROPERTY.test(name) ? `${name}${colon}***` : match,
    );
  const { alone } = maskedOptions(uri);
  return withoutWordsOf(hidden, [...alone, ...alone.map(nameOf)]);
}

/** `name=value` in the driver's words, a name beginning a word. */
const SECRET_OPTION_IN_WORDS = /(?<![\p{L}\p{N}_%])([\p{L}_][\p{L}\p{N}_%]*)=([^\s&;"',)]+)/gu;

/** `NAME:value` of a mechanism property in the driver's words, a name beginning a word. */
const SECRET_PROPERTY_IN_WORDS =
  /(?<![\p{L}\p{N}_])([\p{L}_][\p{L}\p{N}_]*)(:|%3A)([^\s,&;"')]+)/giu;
