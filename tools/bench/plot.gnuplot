# The HTTP scenarios of tools/bench.sh, one line per contender: goodput (% of measured
# capacity) and L0 p99 (x L0 alone) against offered load; median with [min-max] bars.
# gnuplot -e "datafile='bench.dat'; outfile='bench.png'; names='none sluice-dayone'; scens='http-closed http-open'; loads='2 3.5 10'" plot.gnuplot
set terminal pngcairo size 1400,900 font ",10" noenhanced
set output outfile
n = words(names)
ns = words(scens)
set multiplot layout 2,ns title "sluice benchmark: Apache event MPM behind each contender, L0 + L3 surge on keep-alive connections (median, bars = min-max over runs)"
set key bottom left
set grid
set logscale x
set xlabel "offered load (x capacity)"
set xrange [1.6:12.5]
set xtics ("2" 2, "3.5" 3.5, "10" 10)
set ylabel "goodput (% of measured capacity)"
do for [s=1:ns] {
    set title word(scens, s)
    set yrange [0:*]
    plot for [i=1:n] datafile index ((s-1)*n + i-1) using 1:2:3:4 with yerrorlines lw 2 pt i+3 title word(names, i)
}
set ylabel "L0 p99 / L0 alone p99 (dashed: 1.2)"
set logscale y
set key top left
set arrow 1 from graph 0, first 1.2 to graph 1, first 1.2 nohead dt 2 lc rgb "gray40"
do for [s=1:ns] {
    set title word(scens, s)
    set yrange [0.5:*]
    plot for [i=1:n] datafile index ((s-1)*n + i-1) using 1:5:6:7 with yerrorlines lw 2 pt i+3 title word(names, i)
}
unset multiplot
