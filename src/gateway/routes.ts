import type { Tool } from '@modelcontextprotocol/sdk/types.js';

/** A tool as served: its definition and the sandbox the plan gave it. */
export interface RoutedTool {
  /** The definition the client is given (`tools/list`); pins and approvals are of the server's own. */
  definition: Tool;
  sandbox: string;
}

/**
 * The routes served now, by tool name: the gateway lists them, the call relay looks a call's
 * sandbox up in them. Replaced whole when the server's tools change (a re-listing).
 */
export class Routes {
  private tools: ReadonlyMap<string, RoutedTool>;

  constructor(tools: ReadonlyMap<string, RoutedTool>) {
    this.tools = new Map(tools);
  }

  get(tool: string): RoutedTool | undefined {
    return this.tools.get(tool);
  }

  entries(): IterableIterator<[string, RoutedTool]> {
    return this.tools.entries();
  }

  replace(tools: ReadonlyMap<string, RoutedTool>): void {
    this.tools = new Map(tools);
  }
}
