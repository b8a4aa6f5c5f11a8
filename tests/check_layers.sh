#!/usr/bin/env bash
# check_layers.sh — the folder layering and the architecture boundary, from the #include lines
# and the code (comments stripped) of src/ and include/hmoe/:
#   1. includes point down (or into the same folder) along
#        cli -> server | synth -> model -> sched | text -> kernels | cpu -> gguf -> base
#      where base is the format headers every layer may use (common, types, fp16,
#      quant_blocks, json, progress, sysmem: src/util and the type tables); sched and text do not
#      include each other, kernels and cpu may;
#   2. the header include graph has no cycle;
#   3. only src/model/arch names an architecture in code: no general.architecture name and
#      no entry id (both read from the entries in src/model/arch/*.c) outside it, except in
#      src/synth, whose job is writing those architectures' files (tensor lists, keys);
#   4. inside src/model/arch a file includes its own architecture's headers only (a file
#      belongs to the architecture whose entry id, hmoe_arch_<id>, is the longest prefix of its
#      name; arch_table.c to none), and nothing outside src/model/arch includes them.
# Prints one "name ... ok|FAIL" line per rule, then "N passed, N failed". Run from anywhere.
set -u
cd "$(dirname "$0")/.."
exec perl -e '
use strict; use warnings;
my %level = (cli => 0, server => 1, synth => 1, model => 2, sched => 3, text => 3, kernels => 4, cpu => 4, gguf => 5,
             util => 6, base => 6);
# include/hmoe headers by the layer that implements them.
my %hdr = (server => "server", synth => "synth", model => "model", arch => "model", sched => "sched", text => "text", jinja => "text", cuda => "kernels",
           cpu => "cpu", gguf => "gguf", gguf_write => "gguf", common => "base", types => "base", fp16 => "base",
           quant_blocks => "base", json => "base", progress => "base", sysmem => "base");
my ($pass, $fail) = (0, 0);
sub check { my ($name, @bad) = @_;
    if (@bad) { $fail++; print "$name ... FAIL: ", join("; ", @bad[0 .. ($#bad < 9 ? $#bad : 9)]),
                (@bad > 10 ? sprintf("; ... %d more", @bad - 10) : ""), "\n"; }
    else { $pass++; print "$name ... ok\n"; } }
sub slurp { open my $f, "<", $_[0] or die "$_[0]: $!"; local $/; my $s = <$f>; close $f; $s }
sub strip_comments { my $s = shift; $s =~ s{/\*.*?\*/}{ my $c = $&; $c =~ tr/\n//cd; $c }gse;
                     $s =~ s{//[^\n]*}{}g; $s }

my @files = grep { -f } (glob("src/*/*.{c,h,cu,cuh}"), glob("src/model/arch/*.{c,h}"), glob("src/text/jinja/*.{c,h}"), glob("include/hmoe/*.h"));
# The folder (layer) of a file, and of what an include names.
sub folder_of_file { my $p = shift;
    return $hdr{$1} // "?hmoe/$1" if $p =~ m{^include/hmoe/(\w+)\.h$};
    return "base" if $p =~ m{^src/util/};
    return $1 if $p =~ m{^src/(\w+)/}; "?" }
sub target_of { my ($from, $inc) = @_;
    if ($inc =~ m{^hmoe/(\w+)\.h$}) { return ($hdr{$1} // "?hmoe/$1", "include/hmoe/$1.h"); }
    if ($inc =~ m{^(\w+)/}) { return ($1, "src/$inc"); }
    my ($dir) = $from =~ m{^(.*)/};       # a header beside the file
    return (folder_of_file($from), "$dir/$inc"); }

my (@layer_bad, %graph, @arch_inc_bad);
my (%arch_names, %arch_ids, %entry_file);
for my $f (glob("src/model/arch/*.c")) {
    my $s = strip_comments(slurp($f));
    while ($s =~ /const\s+struct\s+hmoe_arch\s+hmoe_arch_(\w+)\s*=\s*\{(.*?)\n\};/gs) {
        my ($id, $body) = ($1, $2);
        $arch_ids{$id} = 1;
        $entry_file{$id} = 1;
        if ($body =~ /\.names\s*=\s*\{([^}]*)\}/) { $arch_names{$1} = 1 while $1 =~ /"([^"]+)"/g; }
    } }
sub arch_of { my $base = shift; my $best = "";
    for my $stem (keys %entry_file) { $best = $stem if index($base, $stem) == 0 && length($stem) > length($best); }
    $best }

for my $f (@files) {
    my $s = slurp($f);
    my $from = folder_of_file($f);
    while ($s =~ /^\s*#\s*include\s+"([^"]+)"/mg) {
        my $inc = $1;
        my ($to, $path) = target_of($f, $inc);
        push @{$graph{$f}}, $path;
        next if $to eq $from;
        if (!exists $level{$from} || !exists $level{$to}) { push @layer_bad, "$f includes $inc (unknown layer $to)"; next; }
        my ($lf, $lt) = ($level{$from}, $level{$to});
        my $ok = $lt > $lf || ($lt == $lf && $lf == 4);
        push @layer_bad, "$f ($from) includes $inc ($to)" unless $ok;
    }
    # rule 4
    while ($s =~ /^\s*#\s*include\s+"model\/arch\/(\w+)\.h"/mg) {
        my $hdr = $1;
        my $hdr_arch = arch_of($hdr);
        if ($f !~ m{^src/model/arch/}) { push @arch_inc_bad, "$f includes model/arch/$hdr.h"; next; }
        my ($base) = $f =~ m{([^/]+)\.\w+$};
        my $own = arch_of($base);
        push @arch_inc_bad, "$f (" . ($own || "no architecture") . ") includes model/arch/$hdr.h ($hdr_arch)"
            unless $own ne "" && $own eq $hdr_arch;
    }
}
check("includes point down the layers cli > synth > model > sched|text > kernels|cpu > gguf > base", @layer_bad);

# rule 2: cycles among the files the includes name (only files of the repository)
my (%state, @cycles);
sub visit { my ($n, @stack) = @_;
    return if ($state{$n} // 0) == 2;
    if (($state{$n} // 0) == 1) { my @c = (@stack, $n); push @cycles, join(" -> ", @c[(grep { $c[$_] eq $n } 0 .. $#c)[0] .. $#c]); return; }
    $state{$n} = 1;
    visit($_, @stack, $n) for grep { -f } @{$graph{$n} // []};
    $state{$n} = 2; }
visit($_) for sort keys %graph;
check("no include cycle", @cycles);

# rule 3
my %seen; my @words = grep { !$seen{$_}++ } (keys %arch_names, keys %arch_ids);
my $re = join "|", map { quotemeta } sort { length($b) <=> length($a) } @words;
my @name_bad;
if (!@words) { push @name_bad, "no architecture entries found in src/model/arch/*.c"; }
else {
    for my $f (@files) {
        next if $f =~ m{^src/model/arch/} || $f =~ m{^src/synth/};
        my @lines = split /\n/, strip_comments(slurp($f));
        for my $i (0 .. $#lines) {
            my $l = $lines[$i];
            $l =~ s/[\w.-]+\.md\b//g;     # references to the docs name a document, not a code path
            push @name_bad, sprintf("%s:%d: %s", $f, $i + 1, $1) if $l =~ /(?<![A-Za-z0-9])($re)(?![A-Za-z0-9])/i;
        }
    } }
check("architecture names (" . join(", ", sort @words) . ") only in src/model/arch (and src/synth)", @name_bad);
check("architecture headers included only by their own architecture", @arch_inc_bad);
print "$pass passed, $fail failed\n";
exit($fail ? 1 : 0);
'
