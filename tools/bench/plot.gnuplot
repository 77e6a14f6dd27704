# Goodput and L0 success against offered load, one line per contender.
# gnuplot -e "datafile='docs/results/goodput.dat'; outfile='docs/results/goodput.png'; names='none sluice-fixed'" tools/bench/plot.gnuplot
set terminal pngcairo size 1200,480 font ",10" noenhanced
set output outfile
n = words(names)
set multiplot layout 1,2 title "sluice benchmark: same server (capacity 400 req/s), same open-loop load, one run"
set key bottom left
set grid
set xlabel "offered load (x capacity)"
set xtics (0.5, 1, 2, 3, 4)
set xrange [0.3:4.2]
set ylabel "goodput (% of capacity)"
set yrange [0:105]
plot for [i=1:n] datafile index (i-1) using 1:2 with linespoints lw 2 pt i+3 title word(names, i)
set ylabel "L0 success (%)"
set yrange [0:105]
plot for [i=1:n] datafile index (i-1) using 1:3 with linespoints lw 2 pt i+3 title word(names, i)
unset multiplot
