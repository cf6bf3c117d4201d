import { after, before, describe } from 'node:test';
import { assertNoLeftovers } from './docker.js';
import { sandboxFolder } from './hintbox-process.js';

/**
 * The before and after every integration file had, said once. Before its first test a suite
 * builds the images it names (each once per process). After its last, it disposes what its
 * tests and hooks handed to {@link Scope.use} or {@link Scope.defer} (last first, every one
 * even when one fails) and then checks that nothing of its hintbox processes is left:
 * containers, networks, volumes, processes ({@link assertNoLeftovers}) — cleanup is part of
 * every feature, so the check is on for every suite. Temp folders are scratch folders, removed
 * when the test process exits whatever failed.
 */
export interface SuiteOptions {
  /** The whole suite's time limit (ms). */
  timeout?: number;
  /** Skips the suite, saying why (e.g. `'needs root'`). */
  skip?: string | false;
  /** What the suite's tests run, built before the first test: `ensure…Image` of ./docker.js. */
  images?: readonly (() => Promise<void>)[];
}

/** What a suite (or a group of tests in it) holds until its end. */
export class Scope {
  private readonly cleanups: (() => unknown)[] = [];
  private folder: string | undefined;

  /**
   * This scope's workspace: a folder the sandbox user may use (uid 10001 when tests run as
   * root), made at the first use, the same folder for the rest of the scope.
   */
  get workspace(): string {
    this.folder ??= sandboxFolder();
    return this.folder;
  }

  /** Disposes `thing` at the scope's end (nothing when it is undefined); returns it. */
  use<T extends AsyncDisposable | Disposable | undefined>(thing: T): T {
    if (thing) {
      this.defer(() => (Symbol.asyncDispose in thing ? thing[Symbol.asyncDispose]() : thing[Symbol.dispose]()));
    }
    return thing;
  }

  /** Runs `cleanup` at the scope's end, before what was deferred earlier. */
  defer(cleanup: () => unknown): void {
    this.cleanups.push(cleanup);
  }

  /**
   * A group of tests with a scope of its own (a server they share, started in its `before`):
   * what it defers ends with the group, before the next group starts.
   */
  describe(name: string, body: (group: Scope) => void): void {
    describe(name, () => {
      const group = new Scope();
      body(group);
      after(() => group.end());
    });
  }

  /** Runs every cleanup, last first; throws what failed once all have run. */
  async end(): Promise<void> {
    const failures: unknown[] = [];
    for (const cleanup of this.cleanups.splice(0).reverse()) {
      try {
        await cleanup();
      } catch (error) {
        failures.push(error);
      }
    }
    if (failures.length === 1) throw failures[0];
    if (failures.length > 1) throw new AggregateError(failures, `${failures.length} cleanups failed`);
  }
}

/**
 * One integration suite (a `describe` with the shared before and after, see
 * {@link SuiteOptions}); `body` declares its tests and says only what is particular to them.
 * Its own `before` hooks run after the images are built; its own `after` hooks, if any, before
 * the suite's cleanups and leftovers check (prefer `suite.defer`: an `after` that throws stops
 * the hooks after it).
 */
export function integrationSuite(name: string, options: SuiteOptions, body: (suite: Scope) => void): void {
  const { images = [], timeout, skip } = options;
  describe(name, { ...(timeout === undefined ? {} : { timeout }), ...(skip ? { skip } : {}) }, () => {
    const suite = new Scope();
    before(async () => {
      for (const image of images) await image();
    });
    body(suite);
    after(async () => {
      const failures: unknown[] = [];
      await suite.end().catch((error: unknown) => failures.push(error));
      await assertNoLeftovers().catch((error: unknown) => failures.push(error));
      if (failures.length > 0) throw failures.length === 1 ? failures[0] : new AggregateError(failures);
    });
  });
}
