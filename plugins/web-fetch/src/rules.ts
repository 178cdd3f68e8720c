import { lookup } from 'node:dns/promises'
import { BlockList, isIP, isIPv6 } from 'node:net'

/** A parsed `allow` or `deny` entry: a host, or (wildcard) any host below it. */
export interface HostPattern {
  /** The entry as written in the config. */
  source: string
  /** Lowercase, punycode, without a trailing dot or IPv6 brackets. */
  host: string
  /** `*.example.org`: the subdomains of `example.org` at any depth, not `example.org` itself. */
  wildcard: boolean
}

export interface HostRules {
  allow: readonly HostPattern[]
  deny: readonly HostPattern[]
  /** Private, loopback, link-local and other non-public addresses may be fetched. */
  allowPrivate: boolean
}

/** Resolves a host name to all of its addresses (by default the system resolver, through `dns.lookup`). */
export type Resolver = (host: string) => Promise<readonly { address: string }[]>

export const resolveAll: Resolver = host => lookup(host, { all: true, verbatim: true })

/** Characters a host name never contains (a scheme, port, path, credentials or glob would bring them). */
const NOT_A_HOST = /[\s/\\:@?#%*[\]]/

/** The URL's host as patterns see it: lowercase, punycode, no trailing dot, no IPv6 brackets. */
export function hostOf(url: URL): string {
  return url.hostname.replace(/^\[(.*)\]$/, '$1').replace(/\.$/, '')
}

/** Parses one `allow` or `deny` entry; throws naming the config key (`allow[2]`) when it is not a host pattern. */
export function parseHostPattern(source: string, key: string): HostPattern {
  const refuse = (): never => {
    throw new Error(
      `@loom/web-fetch config: ${key} ${JSON.stringify(source)} is not a host pattern; write a host name (example.com), an IP address, or *. and a host name (*.example.org for its subdomains), without a scheme, port or path`,
    )
  }
  const text = source.trim().toLowerCase()
  const wildcard = text.startsWith('*.')
  let rest = wildcard ? text.slice(2) : text
  if (rest.startsWith('[') && rest.endsWith(']')) rest = rest.slice(1, -1)
  let host: string
  if (isIPv6(rest)) {
    host = hostOf(new URL(`http://[${rest}]/`))
  } else {
    if (rest === '' || NOT_A_HOST.test(rest)) return refuse()
    try {
      host = hostOf(new URL(`http://${rest}/`))
    } catch {
      return refuse()
    }
  }
  if (host === '' || (wildcard && isIP(host) !== 0)) return refuse()
  return { source, host, wildcard }
}

export function parseHostPatterns(sources: readonly string[], key: string): HostPattern[] {
  return sources.map((source, i) => parseHostPattern(source, `${key}[${i}]`))
}

export function matches(pattern: HostPattern, host: string): boolean {
  return pattern.wildcard ? host.endsWith(`.${pattern.host}`) : host === pattern.host
}

// Addresses that are not the public internet, by kind (for the refusal message).
// IPv4-mapped IPv6 addresses (::ffff:a.b.c.d) match the IPv4 rules by themselves;
// NAT64 (64:ff9b::/96) and 6to4 (2002::/16) addresses embed an IPv4 address and are
// checked as that address.
const IPV4_RANGES: readonly [string, number, string][] = [
  ['0.0.0.0', 8, 'unspecified'],
  ['10.0.0.0', 8, 'private'],
  ['100.64.0.0', 10, 'shared (carrier-grade NAT)'],
  ['127.0.0.0', 8, 'loopback'],
  ['169.254.0.0', 16, 'link-local'],
  ['172.16.0.0', 12, 'private'],
  ['192.0.0.0', 24, 'reserved'],
  ['192.168.0.0', 16, 'private'],
  ['198.18.0.0', 15, 'reserved (benchmarking)'],
  ['224.0.0.0', 4, 'multicast'],
  ['240.0.0.0', 4, 'reserved'],
]
const IPV6_RANGES: readonly [string, number, string][] = [
  ['::', 128, 'unspecified'],
  ['::1', 128, 'loopback'],
  ['fc00::', 7, 'private (unique local)'],
  ['fe80::', 10, 'link-local'],
  ['fec0::', 10, 'site-local'],
  ['ff00::', 8, 'multicast'],
]

const ranges = new Map<string, BlockList>()
const listOf = (kind: string) => {
  let list = ranges.get(kind)
  if (!list) ranges.set(kind, (list = new BlockList()))
  return list
}
/** `a.b.c.d` as the two hex groups an IPv6 address embeds it in. */
const hexGroups = (v4: string) => {
  const [a, b, c, d] = v4.split('.').map(Number)
  return `${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`
}
for (const [address, prefix, kind] of IPV4_RANGES) {
  listOf(kind).addSubnet(address, prefix, 'ipv4')
  listOf(kind).addSubnet(`64:ff9b::${address}`, 96 + prefix, 'ipv6')
  listOf(kind).addSubnet(`2002:${hexGroups(address)}::`, 16 + prefix, 'ipv6')
}
for (const [address, prefix, kind] of IPV6_RANGES) listOf(kind).addSubnet(address, prefix, 'ipv6')

/** The kind of non-public address (`loopback`, `private`, ...), or undefined for a public one. */
export function privateKindOf(address: string): string | undefined {
  const family = isIP(address)
  if (family === 0) return undefined
  for (const [kind, list] of ranges) if (list.check(address, family === 4 ? 'ipv4' : 'ipv6')) return kind
  return undefined
}

const PRIVATE_REFUSED = 'private, loopback and link-local addresses are refused unless the allowPrivate config is set'

/**
 * Checks a URL against the rules, in order: scheme, credentials, `deny`, `allow`,
 * then (unless `allowPrivate`) the address: an IP literal as is, a host name
 * through every address it resolves to. Throws saying why.
 */
export async function checkUrl(url: URL, rules: HostRules, resolve: Resolver = resolveAll): Promise<void> {
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw new Error(`only http and https URLs can be fetched, not ${url.protocol.slice(0, -1)}: (${url.href})`)
  }
  if (url.username !== '' || url.password !== '') throw new Error(`URLs with credentials (user:password@host) are refused`)
  const host = hostOf(url)
  const denied = rules.deny.find(pattern => matches(pattern, host))
  if (denied) throw new Error(`host "${host}" is denied by the deny list (pattern "${denied.source}")`)
  if (rules.allow.length > 0 && !rules.allow.some(pattern => matches(pattern, host))) {
    throw new Error(`host "${host}" is not on the allow list (${rules.allow.map(pattern => pattern.source).join(', ')})`)
  }
  if (rules.allowPrivate) return
  const literal = privateKindOf(host)
  if (literal) throw new Error(`${host} is not a public address (${literal}); ${PRIVATE_REFUSED}`)
  if (isIP(host) !== 0) return
  let addresses: readonly { address: string }[]
  try {
    addresses = await resolve(host)
  } catch (error) {
    throw new Error(`cannot resolve host "${host}": ${(error as Error).message}`)
  }
  for (const { address } of addresses) {
    const kind = privateKindOf(address)
    if (kind) {
      throw new Error(`host "${host}" resolves to ${address}, not a public address (${kind}); ${PRIVATE_REFUSED}`)
    }
  }
}
