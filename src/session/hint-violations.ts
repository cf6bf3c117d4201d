import type { AuditLog } from '../audit/audit-record.js';
import type { PrivilegeViolation } from '../database/socket-relay.js';
import type { CallGuard } from '../gateway/call-guard.js';
import type { Gateway } from '../gateway/gateway.js';
import type { SandboxGrant, SandboxPlan } from '../policy/plan-sandboxes.js';
import type { ServerTrustState } from '../policy/server-trust.js';
import type { Logger } from '../util/logger.js';
import { reportDatabaseViolation } from './database-violation.js';
import { reportHintViolation, type HintViolationReport } from './hint-violation.js';

/**
 * A session's answer to a hint its server broke (a write or a network request a tool's hints
 * rule out, a database privilege it does not have): reported with the sandbox's calls in flight
 * (marked) and planned tools, and the server untrusted for the rest of the session, through a
 * gateway's guard, which audits it.
 */
export class HintViolations {
  constructor(
    private readonly options: {
      server: string;
      session: string;
      trust: ServerTrustState;
      grants: ReadonlyMap<string, SandboxGrant>;
      plan: () => SandboxPlan;
      /** The gateways served now, each with its guard. */
      gateways: () => Iterable<[Gateway, { guard?: CallGuard }]>;
      log: Logger;
      audit?: Pick<AuditLog, 'recordEvent'>;
    },
  ) {}

  /** A violation seen in a sandbox (e.g. by its egress proxy), described by `text`. */
  hint(sandboxId: string, text: string): void {
    this.loseTrust(reportHintViolation({ ...this.report(sandboxId), text }));
  }

  /** Postgres refused a sandbox's session. */
  database(sandboxId: string, role: string, violation: PrivilegeViolation): void {
    const privilege = this.options.grants.get(sandboxId)?.database;
    this.loseTrust(reportDatabaseViolation({ role, violation, privilege, ...this.report(sandboxId) }));
  }

  private report(sandboxId: string): Omit<HintViolationReport, 'text'> {
    const { options } = this;
    return {
      sandboxId,
      running: (sandbox, violation) =>
        [...options.gateways()].flatMap(([gateway]) => gateway.noteHintViolation(sandbox, violation)),
      planned: options.plan().sandboxes.find((s) => s.id === sandboxId)?.tools ?? [],
      server: options.server,
      session: options.session,
      log: options.log,
      ...(options.audit ? { audit: options.audit } : {}),
    };
  }

  private loseTrust(reason: string): void {
    const guard = [...this.options.gateways()].find(([, served]) => served.guard)?.[1].guard;
    void (guard ? guard.markUntrusted(reason) : this.options.trust.lose(reason));
  }
}
