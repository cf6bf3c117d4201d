import type { Server } from '@modelcontextprotocol/sdk/server/index.js';
import {
  ListPromptsRequestSchema,
  ListResourcesRequestSchema,
  ListResourceTemplatesRequestSchema,
  ListToolsRequestSchema,
  type Tool,
} from '@modelcontextprotocol/sdk/types.js';
import { ENFORCED_META_KEY } from '../policy/advertised-annotations.js';
import { pinPromptOrResource } from '../policy/prompt-resource-pin.js';
import { pinTool } from '../policy/tool-pin.js';
import { NO_PROMPTS_OR_RESOURCES, type PromptsAndResources } from './discover-prompts-and-resources.js';
import { DEFAULT_PAGE_SIZE, pageOf } from './list-pages.js';

/** A tool as a gateway serves it: the definition the client is given, and the sandbox its calls go to. */
export interface RoutedTool {
  /** The definition the client is given (`tools/list`); pins and approvals are of the server's own. */
  definition: Tool;
  sandbox: string;
}

export interface ClientCatalogOptions {
  /** The routes served at first. */
  tools: ReadonlyMap<string, RoutedTool>;
  /** The prompts, resources and templates the client may see (approved). Default none. */
  promptsAndResources?: PromptsAndResources;
  /** Whether the client may see a routed tool now (the guard's pins). Default: every one. */
  visible?: (tool: string) => boolean;
  /** Items per page of every list served. Default {@link DEFAULT_PAGE_SIZE}. */
  pageSize?: number;
}

/** Which of a client's lists changed, by content: what it must be told to list again. */
export interface ListsChanged {
  tools?: boolean;
  prompts?: boolean;
  /** Resources or resource templates (MCP announces both with one notification). */
  resources?: boolean;
}

/**
 * What one client is shown of a server's catalog: the routed tools it may see, and the prompts,
 * resources and templates it may see, served page by page (`list-pages.ts`) on the four list
 * requests; and, when they are replaced (a re-listing, an approval), whether what the client
 * sees changed, compared by pins in no order (the same items in another order or key order are
 * no change), so that `list_changed` is sent only when it did. A server's own
 * `_meta["io.hintbox/enforced"]` on a prompt, resource or template is dropped: that key is
 * hintbox's account of a tool, and a server must not forge one.
 */
export class ClientCatalog {
  private tools: Map<string, RoutedTool>;
  private shown: PromptsAndResources;

  constructor(private readonly options: ClientCatalogOptions) {
    this.tools = new Map(options.tools);
    this.shown = withoutHintboxMeta(options.promptsAndResources ?? NO_PROMPTS_OR_RESOURCES);
  }

  /** Answers `server`'s four list requests from this catalog, a page at a time. */
  serveOn(server: Server): void {
    const pageSize = this.options.pageSize ?? DEFAULT_PAGE_SIZE;
    const paged = <T>(items: readonly T[], request: { params?: { cursor?: unknown } }) =>
      pageOf(items, request.params?.cursor, pageSize);
    server.setRequestHandler(ListToolsRequestSchema, (request) => {
      const { page, nextCursor } = paged(this.visibleTools(), request);
      return { tools: page, ...(nextCursor ? { nextCursor } : {}) };
    });
    server.setRequestHandler(ListPromptsRequestSchema, (request) => {
      const { page, nextCursor } = paged(this.shown.prompts, request);
      return { prompts: page, ...(nextCursor ? { nextCursor } : {}) };
    });
    server.setRequestHandler(ListResourcesRequestSchema, (request) => {
      const { page, nextCursor } = paged(this.shown.resources, request);
      return { resources: page, ...(nextCursor ? { nextCursor } : {}) };
    });
    server.setRequestHandler(ListResourceTemplatesRequestSchema, (request) => {
      const { page, nextCursor } = paged(this.shown.resourceTemplates, request);
      return { resourceTemplates: page, ...(nextCursor ? { nextCursor } : {}) };
    });
  }

  /** The route of a tool served now (visible or not: the guard decides what a hidden one's call gets). */
  route(tool: string): RoutedTool | undefined {
    return this.tools.get(tool);
  }

  /** Whether the client is shown this prompt. */
  showsPrompt(name: string): boolean {
    return this.shown.prompts.some((p) => p.name === name);
  }

  /** Whether the client is shown this resource or resource template (a completion's reference). */
  showsResourceRef(uri: string): boolean {
    return (
      this.shown.resourceTemplates.some((t) => t.uriTemplate === uri) || this.shown.resources.some((r) => r.uri === uri)
    );
  }

  /**
   * Serves new routes (after a re-listing). `beforeCompare` runs first: what is visible also
   * depends on the guard's pins, which it updates. Says whether what the client sees changed.
   */
  replaceTools(tools: ReadonlyMap<string, RoutedTool>, beforeCompare?: () => void): ListsChanged {
    const before = this.visibleToolPins();
    beforeCompare?.();
    this.tools = new Map(tools);
    return { tools: before !== this.visibleToolPins() };
  }

  /** Serves new prompts, resources and templates; says which lists changed. */
  replacePromptsAndResources(next: PromptsAndResources): ListsChanged {
    const before = this.shown;
    this.shown = withoutHintboxMeta(next);
    const changed = (a: readonly object[], b: readonly object[]): boolean => pinsOf(a) !== pinsOf(b);
    return {
      prompts: changed(before.prompts, this.shown.prompts),
      resources:
        changed(before.resources, this.shown.resources) ||
        changed(before.resourceTemplates, this.shown.resourceTemplates),
    };
  }

  private visibleTools(): Tool[] {
    const visible = this.options.visible ?? (() => true);
    return [...this.tools.entries()].filter(([name]) => visible(name)).map(([, t]) => t.definition);
  }

  /** What the client sees of the tools, as pins (the canonical form), in no order. */
  private visibleToolPins(): string {
    return this.visibleTools()
      .map((definition) => pinTool(definition).hash)
      .sort()
      .join(',');
  }
}

/** Prompts, resources or templates as pins, in no order. */
function pinsOf(items: readonly object[]): string {
  return items
    .map((item) => pinPromptOrResource(item).hash)
    .sort()
    .join(',');
}

function withoutHintboxMeta(listed: PromptsAndResources): PromptsAndResources {
  const clean = <T extends { _meta?: Record<string, unknown> }>(item: T): T => {
    if (!item._meta || !Object.hasOwn(item._meta, ENFORCED_META_KEY)) return item;
    const meta = { ...item._meta };
    delete meta[ENFORCED_META_KEY];
    return { ...item, _meta: meta };
  };
  return {
    prompts: listed.prompts.map(clean),
    resources: listed.resources.map(clean),
    resourceTemplates: listed.resourceTemplates.map(clean),
  };
}
