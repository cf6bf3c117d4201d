/** The lists a server announces changes of: its tools, or its prompts and resources (and templates). */
export type AnnouncedList = 'tools' | 'promptsAndResources';

const ANNOUNCING: Readonly<Record<string, AnnouncedList>> = Object.freeze({
  'notifications/tools/list_changed': 'tools',
  'notifications/prompts/list_changed': 'promptsAndResources',
  'notifications/resources/list_changed': 'promptsAndResources',
});

/**
 * A server's announcements that a list changed, made before anyone listened to them (the
 * discovery sandbox, before a gateway serves it): noted per list with the sandbox that made
 * them, so that the list is read again before it is served. `From` is whatever lists again.
 */
export class EarlyAnnouncements<From> {
  private readonly announced = new Map<AnnouncedList, From>();

  /** Notes `message` if it announces a change (true: it was one, and is taken). */
  take(message: object, from: From): boolean {
    const { method } = message as { method?: unknown };
    const list = typeof method === 'string' ? ANNOUNCING[method] : undefined;
    if (list) this.announced.set(list, from);
    return list !== undefined;
  }

  /** Who announced a change of `list` since the last look (then forgotten), if anyone did. */
  takeFrom(list: AnnouncedList): From | undefined {
    const from = this.announced.get(list);
    this.announced.delete(list);
    return from;
  }
}
