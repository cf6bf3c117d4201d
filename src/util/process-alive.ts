/** Is a process with this pid alive, as far as this process can tell? (EPERM: it exists, someone else's.) */
export function isProcessAlive(pid: number): boolean {
  if (!Number.isInteger(pid) || pid <= 0) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** Is the hintbox process that owns a session (its sandboxes, roles) still running? Injected for tests. */
export type IsOwnerAlive = (ownerHost: string | undefined, ownerPid: number) => boolean;

/** Owners on another host are assumed alive: we cannot tell, so we leave them alone. */
export function makeIsOwnerAlive(thisHost: string): IsOwnerAlive {
  return (ownerHost, ownerPid) => {
    if (ownerHost !== thisHost || !Number.isInteger(ownerPid) || ownerPid <= 0) return true;
    return isProcessAlive(ownerPid);
  };
}
