import { BlockList, isIP } from 'node:net';
import { domainToASCII } from 'node:url';

type Family = 'ipv4' | 'ipv6';

interface RefusedRange {
  list: BlockList;
  /** Completes "<ip> is ...". */
  reason: string;
}

function ranges(family: Family, table: ReadonlyArray<readonly [string, number, string]>) {
  return table.map(([network, prefix, reason]): RefusedRange => {
    const list = new BlockList();
    list.addSubnet(network, prefix, family);
    return { list, reason };
  });
}

/**
 * Cloud metadata and host-agent endpoints: credentials live there. They are refused even for an
 * allowlisted host name (a name's DNS answer is not the operator's word); only an allowlist CIDR
 * or address containing them lets them through.
 */
const METADATA_V4 = ranges('ipv4', [
  // AWS, GCP, Azure, OpenStack, DigitalOcean, Oracle, Hetzner, Linode and most others.
  ['169.254.169.254', 32, 'a link-local address (cloud metadata)'],
  // AWS ECS task metadata and credentials, and the EKS Pod Identity agent.
  ['169.254.170.2', 32, 'a link-local address (container metadata)'],
  ['169.254.170.23', 32, 'a link-local address (container credentials)'],
  // Tencent Cloud and Scaleway.
  ['169.254.0.23', 32, 'a link-local address (cloud metadata)'],
  ['169.254.42.42', 32, 'a link-local address (cloud metadata)'],
  // Alibaba Cloud: inside the CGNAT range.
  ['100.100.100.200', 32, 'a shared (CGNAT) address (cloud metadata)'],
  // Oracle Cloud's older metadata address.
  ['192.0.0.192', 32, 'a reserved address (cloud metadata)'],
  // Azure WireServer and its instance agent: a public address, reachable only from Azure VMs.
  ['168.63.129.16', 32, 'a cloud platform address (Azure WireServer)'],
]);

const METADATA_V6 = ranges('ipv6', [
  ['fd00:ec2::254', 128, 'a unique local address (cloud metadata)'],
  ['fd00:ec2::23', 128, 'a unique local address (container credentials)'],
  ['fd20:ce::254', 128, 'a unique local address (cloud metadata)'],
  ['fd00:42::42', 128, 'a unique local address (cloud metadata)'],
]);

// Checked after the metadata addresses, in order.
const REFUSED_V4 = ranges('ipv4', [
  // Linux connects 0.0.0.0 to the local host.
  ['0.0.0.0', 32, 'an unspecified address'],
  ['0.0.0.0', 8, 'a reserved address ("this network")'],
  ['10.0.0.0', 8, 'a private address'],
  ['100.64.0.0', 10, 'a shared (CGNAT) address'],
  ['127.0.0.0', 8, 'a loopback address'],
  ['169.254.0.0', 16, 'a link-local address'],
  ['172.16.0.0', 12, 'a private address'],
  ['192.0.0.0', 24, 'a reserved address (IETF protocol assignments)'],
  ['192.0.2.0', 24, 'a documentation address'],
  ['192.88.99.0', 24, 'a reserved address (6to4 relay anycast)'],
  ['192.168.0.0', 16, 'a private address'],
  ['198.18.0.0', 15, 'a reserved address (benchmarking)'],
  ['198.51.100.0', 24, 'a documentation address'],
  ['203.0.113.0', 24, 'a documentation address'],
  ['224.0.0.0', 4, 'a multicast address'],
  ['240.0.0.0', 4, 'a reserved address'],
]);

// IPv4-mapped, NAT64, 6to4, Teredo and IPv4-compatible forms are decided by the IPv4 address they
// carry (see embeddedIpv4), before this table.
const REFUSED_V6 = ranges('ipv6', [
  ['::', 128, 'an unspecified address'],
  ['::1', 128, 'a loopback address'],
  ['64:ff9b:1::', 48, 'a reserved address (local-use NAT64)'],
  ['100::', 64, 'a reserved address (discard-only)'],
  ['2001:2::', 48, 'a reserved address (benchmarking)'],
  ['2001:10::', 28, 'a reserved address (ORCHID)'],
  ['2001:20::', 28, 'a reserved address (ORCHIDv2)'],
  ['2001:db8::', 32, 'a documentation address'],
  ['3fff::', 20, 'a documentation address'],
  ['fc00::', 7, 'a unique local (private) address'],
  ['fe80::', 10, 'a link-local address'],
  ['fec0::', 10, 'a site-local (private) address'],
  ['ff00::', 8, 'a multicast address'],
]);

// Outside 2000::/3 nothing is assigned as global unicast, so whatever is left there is refused.
const GLOBAL_UNICAST_V6 = ranges('ipv6', [['2000::', 3, 'global unicast']])[0]?.list;

/** The eight 16-bit groups of a valid IPv6 address; an embedded dotted quad becomes two groups. */
function ipv6Groups(ip: string): number[] {
  let text = ip.toLowerCase();
  const quad = /(\d+)\.(\d+)\.(\d+)\.(\d+)$/.exec(text);
  if (quad !== null) {
    const [a = 0, b = 0, c = 0, d = 0] = quad.slice(1).map(Number);
    text = `${text.slice(0, quad.index)}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  }
  const [head = '', tail] = text.split('::');
  const left = head === '' ? [] : head.split(':');
  const right = tail === undefined || tail === '' ? [] : tail.split(':');
  const zeros = tail === undefined ? [] : Array<string>(8 - left.length - right.length).fill('0');
  return [...left, ...zeros, ...right].map((group) => Number.parseInt(group, 16));
}

function ipv4From(high: number, low: number): string {
  return [high >> 8, high & 0xff, low >> 8, low & 0xff].join('.');
}

/** Drops an interface scope ('fe80::1%eth0'): it does not change which range an address is in. */
function withoutScope(ip: string): string {
  const percent = ip.indexOf('%');
  return percent === -1 ? ip : ip.slice(0, percent);
}

/**
 * A comparable form of an IP address: dotted quad for IPv4 and IPv4-mapped IPv6 (a dual-stack
 * socket reports '::ffff:127.0.0.1' for an IPv4 peer), eight zero-padded groups otherwise.
 * Returns null for anything that is not an IP address.
 */
export function canonicalIp(ip: string): string | null {
  const bare = withoutScope(ip);
  const family = isIP(bare);
  if (family === 4) return bare;
  if (family !== 6) return null;
  const g = ipv6Groups(bare);
  if (g.slice(0, 5).every((group) => group === 0) && g[5] === 0xffff) {
    return ipv4From(g[6] ?? 0, g[7] ?? 0);
  }
  return g.map((group) => group.toString(16).padStart(4, '0')).join(':');
}

/** The IPv4 address an IPv6 address stands for (mapped, NAT64, 6to4, Teredo, compatible). */
function embeddedIpv4(groups: readonly number[]): { form: string; ipv4: string } | null {
  const [g0 = 0, g1 = 0, g2 = 0, g3 = 0, g4 = 0, g5 = 0, g6 = 0, g7 = 0] = groups;
  const zeroPrefix = g0 === 0 && g1 === 0 && g2 === 0 && g3 === 0 && g4 === 0;
  if (zeroPrefix && g5 === 0xffff) return { form: 'an IPv4-mapped', ipv4: ipv4From(g6, g7) };
  if (g0 === 0x64 && g1 === 0xff9b && g2 === 0 && g3 === 0 && g4 === 0 && g5 === 0) {
    return { form: 'a NAT64', ipv4: ipv4From(g6, g7) };
  }
  if (g0 === 0x2002) return { form: 'a 6to4', ipv4: ipv4From(g1, g2) };
  // Teredo carries the client's address with every bit inverted.
  if (g0 === 0x2001 && g1 === 0) {
    return { form: 'a Teredo', ipv4: ipv4From(g6 ^ 0xffff, g7 ^ 0xffff) };
  }
  // '::' and '::1' are not IPv4-compatible addresses but the unspecified and loopback ones.
  if (zeroPrefix && g5 === 0 && (g6 !== 0 || g7 > 1)) {
    return { form: 'a deprecated IPv4-compatible', ipv4: ipv4From(g6, g7) };
  }
  return null;
}

const LABEL = /^[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?$/;

/** Lower-case ASCII form of a host name without its trailing dot, or null when it is not one. */
function normaliseHostName(name: string): string | null {
  const ascii = domainToASCII(name.trim());
  const bare = ascii.endsWith('.') ? ascii.slice(0, -1) : ascii;
  if (bare === '' || bare.length > 253 || isIP(bare) !== 0) return null;
  const labels = bare.split('.');
  if (!labels.every((label) => LABEL.test(label))) return null;
  // URL parsers read a name ending in a numeric label as an IPv4 address, never as a host name.
  const last = labels[labels.length - 1] ?? '';
  if (/^(?:\d+|0x[0-9a-f]*)$/.test(last)) return null;
  return bare;
}

/** Refused destinations: loopback, private, link-local, CGNAT, multicast, unspecified, reserved, documentation ranges, IPv6 loopback/ULA/link-local/multicast, and IPv4-mapped (::ffff:a.b.c.d) / NAT64 (64:ff9b::/96) / 6to4 forms of refused IPv4 addresses. */
export class AddressPolicy {
  private constructor(
    private readonly allowed: BlockList,
    private readonly hosts: ReadonlySet<string>,
    /** `*.example.com` entries, stored as '.example.com'. */
    private readonly suffixes: readonly string[],
  ) {}

  /** From ASSAY_FETCH_ALLOW: comma-separated CIDRs (v4 or v6) and host names; '' allows nothing extra. Throws Error with a clear message naming the bad entry. */
  static fromSetting(allow: string): AddressPolicy {
    const allowed = new BlockList();
    const hosts = new Set<string>();
    const suffixes: string[] = [];
    for (const raw of allow.split(',')) {
      const entry = raw.trim();
      if (entry === '') continue;
      const bad = (why: string) => new Error(`allowlist entry "${entry}" ${why}`);
      const slash = entry.indexOf('/');
      if (slash !== -1) {
        const network = entry.slice(0, slash);
        const prefixText = entry.slice(slash + 1);
        const family = isIP(network);
        if (family === 0 || network.includes('%')) {
          throw bad(`is not a CIDR: "${network}" is not an IPv4 or IPv6 address`);
        }
        const max = family === 4 ? 32 : 128;
        if (!/^\d{1,3}$/.test(prefixText) || Number(prefixText) > max) {
          throw bad(`is not a CIDR: the prefix length must be 0 to ${max} for IPv${family}`);
        }
        allowed.addSubnet(network, Number(prefixText), family === 4 ? 'ipv4' : 'ipv6');
        continue;
      }
      const family = isIP(entry);
      if (family !== 0 && !entry.includes('%')) {
        allowed.addAddress(entry, family === 4 ? 'ipv4' : 'ipv6');
        continue;
      }
      if (entry.startsWith('*.')) {
        const suffix = normaliseHostName(entry.slice(2));
        if (suffix === null) throw bad('is not a valid wildcard host name (like *.example.com)');
        suffixes.push(`.${suffix}`);
        continue;
      }
      const host = normaliseHostName(entry);
      if (host === null) {
        throw bad(
          'is neither a CIDR (like 10.0.0.0/8 or fd00::/8), an IP address nor a host name (like files.example.com or *.example.com)',
        );
      }
      hosts.add(host);
    }
    return new AddressPolicy(allowed, hosts, suffixes);
  }

  /**
   * A refusal's message, ending with the setting that would allow the destination: the message is
   * all a client sees, and the first a person trying Assay on one machine meets is a fetch or
   * callback to their own machine.
   */
  refusalMessage(refused: string, reason: string): string {
    return `${refused}: ${reason}; the service allows it only if listed in ASSAY_FETCH_ALLOW`;
  }

  /** Reason the IP is refused, or null when it may be contacted. `hostname` is the name in the URL (an allowlisted host name lets any of its addresses through but cloud metadata ones, which only an allowlisted CIDR or address lets through). */
  refusal(ip: string, hostname: string): string | null {
    const bare = withoutScope(ip.startsWith('[') && ip.endsWith(']') ? ip.slice(1, -1) : ip);
    const family = isIP(bare);
    if (family === 0) return `${ip} is not an IP address`;
    const why = this.hostAllowed(hostname)
      ? this.metadataReason(bare, family)
      : family === 4
        ? this.ipv4Reason(bare)
        : this.ipv6Reason(bare);
    return why === null ? null : `${ip} is ${why}`;
  }

  /** For a URL's host that is an IP literal, the reason it is refused; null for names and allowed addresses. */
  literalRefusal(hostname: string): string | null {
    const bare =
      hostname.startsWith('[') && hostname.endsWith(']') ? hostname.slice(1, -1) : hostname;
    return isIP(withoutScope(bare)) === 0 ? null : this.refusal(bare, bare);
  }

  private hostAllowed(hostname: string): boolean {
    const unbracketed = hostname.startsWith('[') ? hostname.slice(1, -1) : hostname;
    if (isIP(unbracketed) !== 0) return false;
    const name = normaliseHostName(unbracketed);
    if (name === null) return false;
    return this.hosts.has(name) || this.suffixes.some((suffix) => name.endsWith(suffix));
  }

  /** Why a metadata address is refused (in any IPv6 form of it), unless allowed by address. */
  private metadataReason(ip: string, family: number): string | null {
    if (family === 4) {
      if (this.allowed.check(ip, 'ipv4')) return null;
      return METADATA_V4.find((range) => range.list.check(ip, 'ipv4'))?.reason ?? null;
    }
    if (this.allowed.check(ip, 'ipv6')) return null;
    const embedded = embeddedIpv4(ipv6Groups(ip));
    if (embedded !== null) {
      const why = this.metadataReason(embedded.ipv4, 4);
      return why === null ? null : `${embedded.form} form of ${embedded.ipv4}, ${why}`;
    }
    return METADATA_V6.find((range) => range.list.check(ip, 'ipv6'))?.reason ?? null;
  }

  private ipv4Reason(ip: string): string | null {
    if (this.allowed.check(ip, 'ipv4')) return null;
    const metadata = METADATA_V4.find((range) => range.list.check(ip, 'ipv4'));
    if (metadata !== undefined) return metadata.reason;
    return REFUSED_V4.find((range) => range.list.check(ip, 'ipv4'))?.reason ?? null;
  }

  private ipv6Reason(ip: string): string | null {
    // BlockList matches IPv4 rules against IPv4-mapped addresses too, so 127.0.0.1/32 allows
    // ::ffff:127.0.0.1, the same destination.
    if (this.allowed.check(ip, 'ipv6')) return null;
    const embedded = embeddedIpv4(ipv6Groups(ip));
    if (embedded !== null) {
      const why = this.ipv4Reason(embedded.ipv4);
      if (why !== null) return `${embedded.form} form of ${embedded.ipv4}, ${why}`;
      // Deprecated IPv4-compatible addresses have no legitimate use, whatever they carry.
      return embedded.form === 'a deprecated IPv4-compatible'
        ? `${embedded.form} address (of ${embedded.ipv4})`
        : null;
    }
    const range = [...METADATA_V6, ...REFUSED_V6].find((candidate) =>
      candidate.list.check(ip, 'ipv6'),
    );
    if (range !== undefined) return range.reason;
    if (GLOBAL_UNICAST_V6?.check(ip, 'ipv6') !== true) {
      return 'a reserved address (outside global unicast 2000::/3)';
    }
    return null;
  }
}
