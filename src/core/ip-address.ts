/** IP address arithmetic shared by the sensor URL check and the per-address rate limit. */

/** An IPv4 address (dotted, valid) as a 32-bit number. */
export function ipv4(a: string): number {
  return a.split(".").reduce((n, part) => ((n << 8) | Number(part)) >>> 0, 0);
}

/** The eight 16-bit groups of a valid IPv6 address (isIP says 6): `::` expanded, a dotted tail split in two, a zone dropped. */
export function ipv6Groups(address: string): number[] {
  const [text = ""] = address.split("%");
  const parse = (part: string | undefined) =>
    !part ? [] : part.split(":").flatMap((g) => (g.includes(".") ? [ipv4(g) >>> 16, ipv4(g) & 0xffff] : [parseInt(g, 16)]));
  const [head, tail] = text.split("::");
  const before = parse(head);
  const after = parse(tail);
  return [...before, ...Array<number>(8 - before.length - after.length).fill(0), ...after];
}
