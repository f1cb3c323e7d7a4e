package whose.lib.sources_test

import data.whose.lib.sources

test_change_record_is_authoritative if sources.authoritative({"source": {"kind": "change_record"}})

test_conversation_is_not_authoritative if not sources.authoritative({"source": {"kind": "conversation"}})

test_missing_source_is_not_authoritative if not sources.authoritative({})

test_group_announcement_on_qualifying_channel if sources.qualifying_announcement({
	"source": {"kind": "announcement", "channel": "all-hands"},
	"audience": ["group:launch-team"],
})

test_announcement_on_other_channel_does_not_qualify if not sources.qualifying_announcement({
	"source": {"kind": "announcement", "channel": "dm"},
	"audience": ["group:launch-team"],
})

test_announcement_to_individuals_does_not_qualify if not sources.qualifying_announcement({
	"source": {"kind": "announcement", "channel": "all-hands"},
	"audience": ["alice", "bob", "carol"],
})

test_conversation_does_not_qualify if not sources.qualifying_announcement({
	"source": {"kind": "conversation", "channel": "all-hands"},
	"audience": ["group:launch-team"],
})
