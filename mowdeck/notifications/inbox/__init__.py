"""Inbox: who hears of an event, what they keep, what they chose (ADR 0022).

- ``fanout``: pending events to inbox items, recipients re-checked with ``can_view``,
  then ``notifications.sent``; ``recipients``: the subscribers who want an event.
- ``preferences``: the preferences document; ``routes``: the preferences and inbox API,
  ``access``: who is asking.
- ``identity``: users leaving and grants changing; ``names``: the Fleet name cache;
  ``erasure``: a user's or a mower's rows in every part, in one transaction.
"""
