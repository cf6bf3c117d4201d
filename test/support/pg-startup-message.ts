/**
 * A Postgres StartupMessage (protocol 3.0) with the given parameters, as a client sends it first:
 * what the relay's parser (src/database/pg-wire.ts) reads, built the way the protocol spells it.
 */
export function encodeStartupMessage(parameters: Record<string, string>): Buffer {
  const pairs = Object.entries(parameters).map(([k, v]) => `${k}\0${v}\0`);
  const body = Buffer.from(pairs.join('') + '\0', 'utf8');
  const packet = Buffer.alloc(8 + body.length);
  packet.writeInt32BE(packet.length, 0);
  packet.writeInt32BE(3 << 16, 4);
  body.copy(packet, 8);
  return packet;
}
