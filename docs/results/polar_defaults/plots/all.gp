set terminal pngcairo noenhanced size 900,560 font 'DejaVu Sans,11'
set datafile missing '?'
set grid
set key bottom right
set ylabel 'test accuracy (%)'
set output 'docs/results/polar_defaults/accuracy_vs_epoch_all.png'
set title 'polar_defaults'
set xlabel 'epoch'
unset logscale x
plot 'docs/results/polar_defaults/plots/all_0.dat' using 1:2 with linespoints lw 2 pt 1 title 'dense_s1', \
     'docs/results/polar_defaults/plots/all_1.dat' using 1:2 with linespoints lw 2 pt 2 title 'polar_r075_s1', \
     'docs/results/polar_defaults/plots/all_2.dat' using 1:2 with linespoints lw 2 pt 3 title 'polar_r075_s2', \
     'docs/results/polar_defaults/plots/all_3.dat' using 1:2 with linespoints lw 2 pt 4 title 'polar_r075_s3', \
     'docs/results/polar_defaults/plots/all_4.dat' using 1:2 with linespoints lw 2 pt 5 title 'polar_r09_s1', \
     'docs/results/polar_defaults/plots/all_5.dat' using 1:2 with linespoints lw 2 pt 6 title 'polar_r09_s2', \
     'docs/results/polar_defaults/plots/all_6.dat' using 1:2 with linespoints lw 2 pt 7 title 'polar_r09_s3', \
     'docs/results/polar_defaults/plots/all_7.dat' using 1:2 with linespoints lw 2 pt 8 title 'dense_s2', \
     'docs/results/polar_defaults/plots/all_8.dat' using 1:2 with linespoints lw 2 pt 9 title 'dense_s3'
set output 'docs/results/polar_defaults/accuracy_vs_time_all.png'
set title 'polar_defaults'
set xlabel 'wall time (s)'
unset logscale x
plot 'docs/results/polar_defaults/plots/all_0.dat' using 3:2 with linespoints lw 2 pt 1 title 'dense_s1', \
     'docs/results/polar_defaults/plots/all_1.dat' using 3:2 with linespoints lw 2 pt 2 title 'polar_r075_s1', \
     'docs/results/polar_defaults/plots/all_2.dat' using 3:2 with linespoints lw 2 pt 3 title 'polar_r075_s2', \
     'docs/results/polar_defaults/plots/all_3.dat' using 3:2 with linespoints lw 2 pt 4 title 'polar_r075_s3', \
     'docs/results/polar_defaults/plots/all_4.dat' using 3:2 with linespoints lw 2 pt 5 title 'polar_r09_s1', \
     'docs/results/polar_defaults/plots/all_5.dat' using 3:2 with linespoints lw 2 pt 6 title 'polar_r09_s2', \
     'docs/results/polar_defaults/plots/all_6.dat' using 3:2 with linespoints lw 2 pt 7 title 'polar_r09_s3', \
     'docs/results/polar_defaults/plots/all_7.dat' using 3:2 with linespoints lw 2 pt 8 title 'dense_s2', \
     'docs/results/polar_defaults/plots/all_8.dat' using 3:2 with linespoints lw 2 pt 9 title 'dense_s3'
set output 'docs/results/polar_defaults/accuracy_vs_bytes_all.png'
set title 'polar_defaults'
set xlabel 'MB sent per worker'
set logscale x
plot 'docs/results/polar_defaults/plots/all_0.dat' using 4:2 with linespoints lw 2 pt 1 title 'dense_s1', \
     'docs/results/polar_defaults/plots/all_1.dat' using 4:2 with linespoints lw 2 pt 2 title 'polar_r075_s1', \
     'docs/results/polar_defaults/plots/all_2.dat' using 4:2 with linespoints lw 2 pt 3 title 'polar_r075_s2', \
     'docs/results/polar_defaults/plots/all_3.dat' using 4:2 with linespoints lw 2 pt 4 title 'polar_r075_s3', \
     'docs/results/polar_defaults/plots/all_4.dat' using 4:2 with linespoints lw 2 pt 5 title 'polar_r09_s1', \
     'docs/results/polar_defaults/plots/all_5.dat' using 4:2 with linespoints lw 2 pt 6 title 'polar_r09_s2', \
     'docs/results/polar_defaults/plots/all_6.dat' using 4:2 with linespoints lw 2 pt 7 title 'polar_r09_s3', \
     'docs/results/polar_defaults/plots/all_7.dat' using 4:2 with linespoints lw 2 pt 8 title 'dense_s2', \
     'docs/results/polar_defaults/plots/all_8.dat' using 4:2 with linespoints lw 2 pt 9 title 'dense_s3'
