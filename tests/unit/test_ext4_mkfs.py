"""ext4: no inode-table initialisation in the background, whatever extended options the user
gives."""

from __future__ import annotations

from pgfsbench.storage.ext4 import mkfs_argv


def test_the_users_extended_options_are_merged_with_the_eager_initialisation() -> None:
    argv = mkfs_argv("/dev/loop9", ["-E", "stride=16,stripe_width=64", "-O", "^has_journal"])
    assert argv == [
        "mkfs.ext4",
        "-F",
        "-E",
        "lazy_itable_init=1,lazy_journal_init=0,stride=16,stripe_width=64",
        "-O",
        "^has_journal",
        "/dev/loop9",
    ]
    assert mkfs_argv("/dev/x", ["-Enodiscard"])[3] == (
        "lazy_itable_init=1,lazy_journal_init=0,nodiscard"
    )


def test_a_users_own_lazy_setting_is_kept_and_nothing_doubled() -> None:
    argv = mkfs_argv("/dev/x", ["-E", "lazy_itable_init=1", "-E", "discard"])
    assert argv.count("-E") == 1
    assert argv[3] == "lazy_journal_init=0,lazy_itable_init=1,discard"
    assert mkfs_argv("/dev/x", [])[2:4] == ["-E", "lazy_itable_init=1,lazy_journal_init=0"]


def test_the_mount_asks_for_no_background_initialisation_unless_the_user_chose() -> None:
    from pgfsbench.storage.ext4 import mount_options

    assert mount_options([]) == ["noinit_itable"]
    assert mount_options(["noatime,data=ordered"]) == ["noatime,data=ordered", "noinit_itable"]
    assert mount_options(["init_itable=10"]) == ["init_itable=10"]
    assert mount_options(["noatime", "noinit_itable"]) == ["noatime", "noinit_itable"]
