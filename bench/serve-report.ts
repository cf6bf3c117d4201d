/** The serve bench's figures (serve-bench.ts) as `npm run bench` prints them. */
import type { CallFigures, ServeFigures } from './serve-bench.js';

export function formatServe(figures: ServeFigures): string {
  const f = (s: { median: number; spread: number }, digits = 2) =>
    `${s.median.toFixed(digits)} ±${s.spread.toFixed(digits)}`;
  const row = (name: string, c: CallFigures) =>
    `${name.padEnd(34)}${f(c.p50Ms).padEnd(16)}${f(c.p99Ms).padEnd(16)}${f(c.callsPerSecond, 0).padEnd(14)}` +
    `${f(c.serverCpuUs, 0).padEnd(16)}${f(c.clientCpuUs, 0)}`;
  const lines = [
    'hintbox serve (filesystem server, read_text_file; streamable HTTP on loopback, a bearer token on every request)',
    `${'CLIENT'.padEnd(34)}${'P50 MS'.padEnd(16)}${'P99 MS'.padEnd(16)}${'CALLS/S'.padEnd(14)}${'SERVER CPU µs'.padEnd(16)}CLIENT CPU µs`,
    row('serve, lean node:http client, 1', figures.lean),
    ...figures.calls.map((c) => row(`serve, SDK HTTP client, ${c.clients}`, c)),
    row('run (stdio), SDK stdio client, 1', figures.run),
    row('SDK HTTP alone (no hintbox), 1', figures.bareHttp),
    row('serve, raw HTTP client, paired, 1', figures.paired.serve),
    row('run, raw stdio client, paired, 1', figures.paired.run),
    `serve ÷ run, p50 of one client, clients of the same weight in alternating batches (paired): ${figures.p50Ratio.toFixed(2)}×, target ${figures.p50Target.text}: ${figures.p50Target.met ? 'met' : 'MISSED'}`,
    `  the median of the rounds' ratios (${figures.pairedRatios.map((r) => r.toFixed(2)).join(', ')}); the ratio of the two medians above ${(figures.paired.serve.p50Ms.median / figures.paired.run.p50Ms.median).toFixed(2)}×`,
    `  information: the lean client ÷ the SDK's stdio client ${figures.leanP50Ratio.toFixed(2)}× (their own CPU differs: see CLIENT CPU); the SDK's HTTP client ${figures.sdkP50Ratio.toFixed(2)}×; the SDK's HTTP alone, a trivial tool with no hintbox, ${figures.bareP50Ratio.toFixed(2)}× run (its client's fetch)`,
    '',
    `${'SERVERS'.padEnd(10)}${'SERVE RSS MB'.padEnd(16)}${'READY MS'.padEnd(12)}${'VERIFIED MS'.padEnd(14)}TARGET`,
    ...figures.memory.map(
      (m) =>
        `${String(m.servers).padEnd(10)}${m.rssMb.toFixed(0).padEnd(16)}${m.readyMs.toFixed(0).padEnd(12)}${m.verifiedMs.toFixed(0).padEnd(14)}${[
          m.target,
          m.readyTarget,
        ]
          .flatMap((t) => (t ? [`${t.text}: ${t.met ? 'met' : 'MISSED'}`] : []))
          .join('; ')}`,
    ),
  ];
  return lines.join('\n');
}
